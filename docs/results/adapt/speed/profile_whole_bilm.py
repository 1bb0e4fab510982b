import cProfile, pstats, sys
from pathlib import Path
from spacy_elmo.pretrain.adapt import adapt, adapt_settings
s = adapt_settings(overrides={"tokenized": True, "softmax_max_steps": 20, "max_steps": 60, "eval_every": 1000, "threads": 1})
out = Path("/tmp/adaptbench/prof_out")
import shutil; shutil.rmtree(out, ignore_errors=True)
from spacy_elmo.pretrain import trainer
orig = trainer.Trainer.train
def train(self):
    pr = cProfile.Profile(); pr.enable()
    try:
        return orig(self)
    finally:
        pr.disable(); pr.dump_stats("/tmp/adaptbench/whole.prof")
trainer.Trainer.train = train
adapt(None, [Path("/tmp/adaptbench/ewt_small.txt")], out, s, echo=print)
