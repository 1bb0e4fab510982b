"""spacy_elmo: ELMo (Peters et al. 2018) as a spaCy v3 plugin."""

import re
from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent
VERSION = re.search(r'__version__ = "([^"]+)"', (HERE / "spacy_elmo" / "__init__.py").read_text())[1]

setup(
    name="spacy-elmo",
    version=VERSION,
    description="ELMo deep contextualized word representations for spaCy v3, in PyTorch",
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.9",
    packages=find_packages(include=["spacy_elmo", "spacy_elmo.*"]),
    include_package_data=True,
    package_data={"spacy_elmo": ["py.typed", "data/*.txt", "data/*.jsonl", "models/*/*", "hub/*.json", "configs/*.cfg", "configs/recipes/*.cfg"]},
    install_requires=[
        "spacy>=3.7,<4",
        "thinc>=8.2,<9",
        "torch>=2.1",
        "h5py>=3.0",
        "numpy>=1.21",
        "catalogue>=2.0",
        "srsly>=2.4",
        "confection>=0.1",
        "safetensors>=0.4",
        "typer>=0.9",
        "tqdm>=4.60",
        # hub/: downloads (pooch), the cache folder (platformdirs), HTTP errors (requests).
        "pooch>=1.8",
        "platformdirs>=2.5",
        "requests>=2.19",
        "pydantic>=2",
    ],
    extras_require={
        # elmoformanylangs: the parity reference for ELMoForManyLangs models (tests/test_manylangs.py);
        # it does not import with overrides>=4, whose decorator checks signatures it fails.
        # setuptools and wheel: tests/test_wheel.py builds the wheel offline (--no-build-isolation).
        # pytest-xdist: the README runs the suite on 2 workers (8.5 minutes on 2 cores).
        "test": [
            "pytest>=7", "matplotlib>=3.5", "elmoformanylangs==0.0.4.post2", "overrides<4",
            "setuptools>=61", "wheel", "pytest-xdist>=3",
        ],
        "plot": ["matplotlib>=3.5"],
    },
    entry_points={
        "spacy_factories": ["elmo = spacy_elmo.pipe:make_elmo"],
        "spacy_architectures": [
            "spacy_elmo.ElmoModel.v2 = spacy_elmo.architectures:elmo_model_v2",
            "spacy_elmo.ElmoListener.v1 = spacy_elmo.architectures:elmo_listener_v1",
            "spacy_elmo.ElmoEmbedder.v2 = spacy_elmo.architectures:elmo_embedder_v2",
        ],
        "spacy_readers": ["spacy_elmo.TextCatCorpus.v1 = spacy_elmo.textcat_jsonl:textcat_corpus"],
        "spacy_misc": [
            "spacy_elmo.WeightLoader.v2 = spacy_elmo.loaders:weight_loader_v2",
        ],
        "spacy_cli": ["elmo = spacy_elmo.cli.spacy_app:elmo_pretrain"],
        "console_scripts": ["spacy-elmo = spacy_elmo.cli:main"],
    },
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
        "Framework :: spaCy",
    ],
)
