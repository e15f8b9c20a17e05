import smdistributed.modelparallel.torch as smp
import torch

smp.init()
model = smp.DistributedModel(torch.nn.Linear(8, 8))
optimizer = smp.DistributedOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-4))
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10)

if smp.rdp_rank() == 0:
    opt_dict = optimizer.local_state_dict()
    smp.save({"optimizer": opt_dict}, "/opt/ml/checkpoints/opt.pt", partial=True)
