"""Offline route to the assets: copy them from a local mirror instead of downloading them.

python scripts/prepare_data.py MIRROR_DIR

For every asset in project.yml that is not marked `extra` and not in place yet, copies
MIRROR_DIR/<dest without the leading "assets/"> to its dest. Checks the md5 project.yml gives of
every asset, copied or already in place (a changed file must not train silently). Fails, naming
the missing files, when an asset is neither in place nor in the mirror: then fetch them with
`python -m spacy project assets`.
"""

import hashlib
import shutil
import sys
from pathlib import Path

import srsly
import typer


def main(mirror: Path = typer.Argument(..., help="A directory laid out like assets/")) -> None:
    assets = srsly.read_yaml("project.yml").get("assets", [])
    missing = []
    for asset in assets:
        if asset.get("extra"):
            continue
        dest = Path(asset["dest"])
        checksum = asset.get("checksum")
        if dest.exists():
            if checksum and _md5(dest) != checksum:
                sys.exit(
                    f"{dest} is in place, but its md5 differs from the checksum in project.yml "
                    f"({checksum}); remove it to copy the mirror's or download it again"
                )
            print(f"in place: {dest}")
            continue
        source = mirror / Path(*dest.parts[1:])
        if not source.is_file():
            missing.append(f"{dest} (not in {source.parent})")
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, dest)
        if checksum and _md5(dest) != checksum:
            dest.unlink()
            sys.exit(f"{source}: md5 differs from the checksum in project.yml ({checksum})")
        print(f"copied: {source} -> {dest}")
    if missing:
        sys.exit(
            "These assets are neither in place nor in the mirror; download them with "
            "`python -m spacy project assets`:\n  " + "\n  ".join(missing)
        )


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


if __name__ == "__main__":
    typer.run(main)
