import numpy as np
import pytest

from benchmark.data.embedded import TINY_CONFIG, build_embedded_suite
from benchmark.data.sources import load_mnist


@pytest.fixture(scope="session")
def tiny_suite():
    return build_embedded_suite(TINY_CONFIG)


@pytest.fixture(scope="session")
def mnist():
    return load_mnist()


@pytest.fixture(scope="session")
def digits100(mnist):
    """100 MNIST digits, 10 per class, uint8 (100, 28, 28)."""
    images, labels = mnist
    idx = np.concatenate([np.flatnonzero(labels == c)[:10] for c in range(10)])
    return images[idx]
