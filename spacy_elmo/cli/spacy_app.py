"""Commands added to spaCy's own CLI through the ``spacy_cli`` entry point (spaCy imports this
module when its CLI starts): ``python -m spacy elmo-pretrain CONFIG OUTPUT_DIR`` and
``python -m spacy elmo-init-config CONFIG``."""

from spacy.cli import app as spacy_app

from .pretrain import EXTRA_ARGS, init_config_command, pretrain_command

elmo_pretrain = spacy_app.command("elmo-pretrain", context_settings=EXTRA_ARGS)(pretrain_command)
elmo_init_config = spacy_app.command("elmo-init-config")(init_config_command)
