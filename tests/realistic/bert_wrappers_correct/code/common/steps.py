"""Forward and backward passes, split into microbatches by the library."""

import smdistributed.modelparallel.torch as smp


@smp.step
def train_step(model, input_ids, attention_mask, labels):
    outputs = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
    model.backward(outputs.loss)
    return outputs.loss


@smp.step
def eval_step(model, input_ids, attention_mask, labels):
    outputs = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
    return outputs.loss
