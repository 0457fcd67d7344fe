"""ResNet-50 (He et al., "Deep Residual Learning for Image Recognition", CVPR 2016) in plain PyTorch.

The architecture of the paper's Table 1 with bottleneck blocks ``[3, 4, 6, 3]``: a 7×7
stride-2 stem convolution with batch norm, ReLU and 3×3 stride-2 max pooling; four stages
of bottleneck blocks (1×1 reduce, 3×3, 1×1 expand by 4, batch norm after each
convolution, the stride on the 3×3 convolution, a 1×1 projection with batch norm on the
shortcut where the shape changes); global average pooling and a fully connected
classifier. 25,557,032 parameters with 1000 classes.

Written here, not taken from torchvision, so that it imports with the CPU build of torch
alone. Needs the ``torch`` extra; torch is imported when a model is built.
"""

from __future__ import annotations

from typing import Any

#: Bottleneck blocks per stage of ResNet-50.
RESNET50_BLOCKS = (3, 4, 6, 3)
EXPANSION = 4


def resnet50(num_classes: int = 1000) -> Any:
    """A freshly initialised ResNet-50 as a ``torch.nn.Module``."""
    from torch import nn

    class Bottleneck(nn.Module):
        def __init__(self, in_channels: int, width: int, stride: int) -> None:
            super().__init__()
            out_channels = width * EXPANSION
            self.conv1 = nn.Conv2d(in_channels, width, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3 = nn.Conv2d(width, out_channels, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(out_channels)
            self.relu = nn.ReLU()
            self.downsample = None
            if stride != 1 or in_channels != out_channels:
                self.downsample = nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                                                nn.BatchNorm2d(out_channels))

        def forward(self, x):
            shortcut = x if self.downsample is None else self.downsample(x)
            y = self.relu(self.bn1(self.conv1(x)))
            y = self.relu(self.bn2(self.conv2(y)))
            return self.relu(self.bn3(self.conv3(y)) + shortcut)

    class ResNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU()
            self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
            channels = 64
            stages = []
            for k, blocks in enumerate(RESNET50_BLOCKS):
                width = 64 * 2**k
                layer = []
                for b in range(blocks):
                    layer.append(Bottleneck(channels, width, 2 if (b == 0 and k > 0) else 1))
                    channels = width * EXPANSION
                stages.append(nn.Sequential(*layer))
            self.layer1, self.layer2, self.layer3, self.layer4 = stages
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(channels, num_classes)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(self.avgpool(x).flatten(1))

    return ResNet()
