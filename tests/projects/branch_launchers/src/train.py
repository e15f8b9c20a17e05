import smdistributed.modelparallel.torch as smp
import torch

smp.init()
model = smp.DistributedModel(torch.nn.Linear(8, 8))
optimizer = smp.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1))
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10)
