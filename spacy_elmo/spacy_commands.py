"""Commands added to spaCy's own CLI through the ``spacy_cli`` entry point:
``python -m spacy elmo-pretrain CONFIG OUTPUT_DIR``."""

from spacy.cli._util import app as spacy_app

from .pretrain.commands import EXTRA_ARGS, pretrain_command

spacy_app.command("elmo-pretrain", context_settings=EXTRA_ARGS)(pretrain_command)
