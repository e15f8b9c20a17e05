"""ADE20K images and their label maps, read from the training channel."""

import os

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset


class ADE20KDataset(Dataset):
    def __init__(self, root, split="training", size=512):
        self.images = sorted(os.listdir(os.path.join(root, "images", split)))
        self.root, self.split, self.size = root, split, size

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        name = self.images[index]
        image = Image.open(os.path.join(self.root, "images", self.split, name)).convert("RGB")
        label = Image.open(os.path.join(self.root, "annotations", self.split, name[:-4] + ".png"))
        image = image.resize((self.size, self.size))
        label = label.resize((self.size, self.size), Image.NEAREST)
        pixels = torch.from_numpy(np.asarray(image, dtype=np.float32) / 255.0).permute(2, 0, 1)
        return pixels, torch.from_numpy(np.asarray(label, dtype=np.int64))
