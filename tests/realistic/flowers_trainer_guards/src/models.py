"""Model builders: each returns the network with the input size its transforms must use."""

from torch import nn
from torchvision import models


def build_resnet(num_classes, pretrained=True):
    weights = models.ResNet50_Weights.IMAGENET1K_V2 if pretrained else None
    net = models.resnet50(weights=weights)
    net.fc = nn.Linear(net.fc.in_features, num_classes)
    return net, 224


def build_efficientnet(num_classes):
    net = models.efficientnet_b0(weights=None)
    net.classifier[1] = nn.Linear(net.classifier[1].in_features, num_classes)
    return net, 240
