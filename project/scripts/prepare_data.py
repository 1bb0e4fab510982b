"""Offline route to the assets: copy them from a local mirror instead of downloading them.

python scripts/prepare_data.py MIRROR_DIR [--only CORPUS,CORPUS]

For every asset in project.yml that is not marked `extra` and not in place yet, copies
MIRROR_DIR/<dest without the leading "assets/"> to its dest; with --only, just the assets of those
corpora (the folders under assets/: wikitext-2, ud-english-ewt, wnut17, sst5), so that each
workflow asks only for its own data. Checks the md5 project.yml gives of
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


def main(
    mirror: Path = typer.Argument(..., help="A directory laid out like assets/"),
    only: str = typer.Option("", "--only", help="Comma-separated corpora (folders under assets/); default: all"),
) -> None:
    assets = [a for a in srsly.read_yaml("project.yml").get("assets", []) if not a.get("extra")]
    corpora = sorted({Path(a["dest"]).parts[1] for a in assets})
    wanted = [name for name in only.split(",") if name]
    unknown = [name for name in wanted if name not in corpora]
    if unknown:
        sys.exit(f"--only {','.join(unknown)}: not a corpus of project.yml; its corpora: {', '.join(corpora)}")
    missing = []
    for asset in assets:
        if wanted and Path(asset["dest"]).parts[1] not in wanted:
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
