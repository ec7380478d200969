import numpy as np
import pytest
from PIL import Image

from benchmark.data.resample import area_matrix, bilinear_matrix, nearest_matrix, resize


@pytest.mark.parametrize(("n_in", "n_out"), [(8, 20), (10, 25), (28, 64)])
def test_bilinear_upsampling_matches_pil(n_in, n_out):
    x = np.random.default_rng(0).random((n_in, n_in)).astype(np.float32)
    ref = np.asarray(Image.fromarray(x).resize((n_out, n_out), Image.BILINEAR))
    np.testing.assert_allclose(resize(x, (n_out, n_out)), ref, atol=1e-5)


def test_area_matrix_is_exact_cell_average():
    x = np.random.default_rng(1).random((28, 28))
    fine = np.repeat(np.repeat(x, 10, axis=0), 10, axis=1)  # 280 x 280: each output cell is 28 x 28 of these
    ref = fine.reshape(10, 28, 10, 28).mean(axis=(1, 3))
    np.testing.assert_allclose(resize(x, (10, 10), kind="area"), ref, atol=1e-12)


def test_rows_sum_to_one_and_bad_args():
    for make in (bilinear_matrix, area_matrix, nearest_matrix):
        np.testing.assert_allclose(make(13, 7).sum(axis=1), 1.0)
        with pytest.raises(ValueError, match="resample sizes"):
            make(0, 3)
    np.testing.assert_array_equal(nearest_matrix(2, 4).argmax(axis=1), [0, 0, 1, 1])
    with pytest.raises(ValueError, match="unknown resample kind 'cubic'"):
        resize(np.zeros((3, 3)), (2, 2), kind="cubic")
