"""cProfile of adapt's whole-biLM phase: 60 updates on one thread, no evaluation until the end,
written to whole.prof (python -m pstats whole.prof; whole-bilm-profile.txt is its top 40).

Run: OMP_NUM_THREADS=1 PYTHONPATH=. python docs/results/adapt/speed/profile_whole_bilm.py TEXT OUT
(TEXT: the first 2,500 lines of the speed run's text, 45,506 tokens).
"""

import cProfile
import sys
from pathlib import Path

from spacy_elmo.pretrain import trainer
from spacy_elmo.pretrain.adapt import adapt, adapt_settings

SETTINGS = {"tokenized": True, "softmax_max_steps": 20, "max_steps": 60, "eval_every": 1000, "threads": 1}
train = trainer.Trainer.train


def profiled(self: trainer.Trainer) -> Path:
    profile = cProfile.Profile()
    profile.enable()
    try:
        return train(self)
    finally:
        profile.disable()
        profile.dump_stats("whole.prof")


if __name__ == "__main__":
    trainer.Trainer.train = profiled
    adapt(None, [Path(sys.argv[1])], Path(sys.argv[2]), adapt_settings(overrides=SETTINGS), echo=print)
