"""The causal-LM training step, pipelined by the library."""

import smdistributed.modelparallel.torch as smp


@smp.step
def lm_step(model, input_ids, attention_mask):
    outputs = model(input_ids=input_ids, attention_mask=attention_mask, labels=input_ids)
    model.backward(outputs.loss)
    return outputs.loss
