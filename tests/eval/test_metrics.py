"""Evaluation numbers on a case small enough to work out by hand."""

import math

import numpy as np
import pytest

from training.eval import metrics
from training.probability import log_loss_of_proba
from training.eval.report import confusion_table

# Six examples, three classes (mono, swap, disc). Predictions (argmax) are
# mono, swap, swap, disc, mono, disc: right on examples 0, 2, 3, 5.
Y_TRUE = np.array([0, 0, 1, 2, 2, 2])
PROBA = np.array([
    [0.7, 0.2, 0.1],
    [0.3, 0.6, 0.1],
    [0.1, 0.8, 0.1],
    [0.2, 0.2, 0.6],
    [0.5, 0.1, 0.4],
    [0.0, 0.1, 0.9],
])


def test_confusion_precision_recall_f1_by_hand():
    s = metrics.classification_summary(Y_TRUE, PROBA, ("mono", "swap", "disc"))
    assert s["accuracy"] == pytest.approx(4 / 6)
    # [true][predicted]
    assert s["confusion"] == [[1, 1, 0], [0, 1, 0], [1, 0, 2]]
    # mono: predicted twice (ex 0 right, ex 4 wrong) -> P 1/2; 2 true monos, 1 found -> R 1/2
    # swap: predicted twice (ex 1 wrong, ex 2 right) -> P 1/2; R 1/1
    # disc: predicted twice, both right -> P 1; 3 true, 2 found -> R 2/3
    assert s["precision"] == pytest.approx([0.5, 0.5, 1.0])
    assert s["recall"] == pytest.approx([0.5, 1.0, 2 / 3])
    assert s["f1"] == pytest.approx([0.5, 2 / 3, 0.8])


def test_log_loss_by_hand_with_moses_floor():
    expected = -(math.log(0.7) + math.log(0.3) + math.log(0.8) + math.log(0.6) + math.log(0.4)
                 + math.log(0.9)) / 6
    assert log_loss_of_proba(PROBA, Y_TRUE) == pytest.approx(expected)
    # A zero probability on the true class costs 100 nats (Moses's floor), not infinity.
    assert log_loss_of_proba(np.array([[0.0, 1.0]]), np.array([0])) == pytest.approx(100.0)
    assert metrics.classification_summary(Y_TRUE, PROBA, ["mono", "swap", "disc"])["log_loss"] == pytest.approx(expected)


def test_expected_calibration_error_by_hand():
    # Confidences 0.7, 0.6, 0.8, 0.6, 0.5, 0.9 in 10 bins: [0.5,0.6): ex4 (wrong);
    # [0.6,0.7): ex1 (wrong), ex3 (right); [0.7,0.8): ex0 (right); [0.8,0.9): ex2 (right);
    # [0.9,1]: ex5 (right).
    gaps = [abs(0 - 0.5), abs(1 - 1.2), abs(1 - 0.7), abs(1 - 0.8), abs(1 - 0.9)]
    assert metrics.expected_calibration_error(Y_TRUE, PROBA, n_bins=10) == pytest.approx(sum(gaps) / 6)


def test_perfect_and_empty_slices():
    perfect = np.eye(3)[Y_TRUE]
    s = metrics.classification_summary(Y_TRUE, perfect, ("mono", "swap", "disc"))
    assert s["accuracy"] == 1.0 and s["ece"] == 0.0 and s["log_loss"] == 0.0
    empty = metrics.classification_summary(np.zeros(0, int), np.zeros((0, 3)), ("mono", "swap", "disc"))
    assert empty["examples"] == 0 and math.isnan(empty["accuracy"]) and empty["confusion"] == [[0] * 3] * 3


def test_table4_layout_has_predicted_rows_in_percent():
    s = metrics.classification_summary(Y_TRUE, PROBA, ("mono", "swap", "disc"))
    lines = confusion_table(s).splitlines()
    assert lines[0].startswith("| Predicted \\ true | mono | swap | disc | Accuracy")
    # Row "mono" (predicted mono): true mono 1/6, true swap 0, true disc 1/6.
    assert lines[2].split("|")[1:5] == [" mono ", " 16.7 ", " 0.0 ", " 16.7 "]
    assert "66.7" in lines[3]  # accuracy printed once, on the middle row
