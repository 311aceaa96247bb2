"""Build the real-image retrieval set of the benchmark from the freedesktop icon themes that Debian ships.

Several designers draw the same icon names (``printer``, ``edit-copy``, ``folder``...): a class is an icon name drawn
by at least ``--min-themes`` themes, each theme's drawing one image. Three label levels, finest first: the icon name,
its family (the context and the name's first word, ``actions/edit``), its context (``actions``, ``devices``,
``places``...). Half of the classes train, the other half test, drawn with ``--seed`` (retrieval of unseen classes).

Install the themes first (this script installs nothing; licences in ``benchmarks/real_images/LICENSES.md``)::

    apt-get install adwaita-icon-theme tango-icon-theme gnome-icon-theme mate-icon-theme lxde-icon-theme \\
        oxygen-icon-theme elementary-xfce-icon-theme
    python benchmarks/real_images/build_icons.py --out data/icons

Only the PNG files each theme ships are read (no SVG is rasterised), symbolic (monochrome) icons and symbolic links
(aliases of another name) are skipped. Of a theme's sizes the first of ``SIZES`` that it has is taken, composited on
white and resized to ``--size`` pixels (Lanczos); an image equal pixel for pixel to one already kept (a theme
copying another's drawing) is dropped. The output, ``dataset.csv`` (``path,label,family,context,split``, read by
``ranklit.data.CSVDataset``) and ``images/<theme>/<context>/<name>.png``, is the same on every run with the same
packages and Pillow; ``themes.json`` records the packages' versions and the counts.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import random
import re
import subprocess
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

THEMES: dict[str, str] = {  # folder under /usr/share/icons -> Debian package
    "Adwaita": "adwaita-icon-theme",
    "Tango": "tango-icon-theme",
    "gnome": "gnome-icon-theme",
    "mate": "mate-icon-theme",
    "menta": "mate-icon-theme",
    "nuoveXT2": "lxde-icon-theme",
    "oxygen": "oxygen-icon-theme",
    "elementary-xfce": "elementary-xfce-icon-theme",
}
SIZES: tuple[int, ...] = (64, 48, 96, 128, 256, 512, 32)  # hand-drawn sizes nearest the benchmark's 64 px first
CONTEXTS = {"actions", "apps", "categories", "devices", "emblems", "emotes", "mimetypes", "places", "status",
            "applets", "animations"}
ALIASES = {"mimes": "mimetypes"}


@dataclass(frozen=True)
class Icon:
    """One theme's drawing of one icon name."""

    theme: str
    name: str
    context: str | None  # None: a theme folder that names no context (Adwaita's `legacy`)
    size: int
    path: Path


def scan(root: Path, theme: str) -> list[Icon]:
    """The regular PNG files of a theme whose folders name a size (``48x48`` or ``48``), symbolic icons left out."""
    icons = []
    for path in sorted((root / theme).rglob("*.png")):
        if path.is_symlink() or "symbolic" in path.name:
            continue
        parts = path.relative_to(root / theme).parts[:-1]
        sizes = [int(p.split("x")[0]) for p in parts if re.fullmatch(r"\d+(x\d+)?", p)]
        if not sizes or sizes[0] not in SIZES:
            continue
        contexts = [ALIASES.get(p, p) for p in parts if ALIASES.get(p, p) in CONTEXTS]
        icons.append(Icon(theme, path.stem, contexts[0] if contexts else None, sizes[0], path))
    return icons


def preferred(icons: list[Icon]) -> dict[tuple[str, str], Icon]:
    """For each (theme, name), the drawing at the first size of ``SIZES`` the theme has."""
    best: dict[tuple[str, str], Icon] = {}
    for icon in icons:
        key = (icon.theme, icon.name)
        if key not in best or SIZES.index(icon.size) < SIZES.index(best[key].size):
            best[key] = icon
    return best


def render(icon: Icon, size: int) -> Image.Image:
    """The icon on a white background, ``size`` x ``size`` RGB."""
    with Image.open(icon.path) as image:
        rgba = image.convert("RGBA")
    canvas = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
    canvas.alpha_composite(rgba)
    return canvas.convert("RGB").resize((size, size), Image.Resampling.LANCZOS)


def context_of(icons: list[Icon]) -> str:
    """The context most themes file the name under (ties: alphabetical); ``other`` when none says."""
    votes = Counter(icon.context for icon in icons if icon.context is not None)
    return min(votes, key=lambda c: (-votes[c], c)) if votes else "other"


def package_versions(packages: set[str]) -> dict[str, str]:
    """``dpkg-query``'s version of each package (``unknown`` without dpkg)."""
    versions = {}
    for package in sorted(packages):
        try:
            run = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True)
            versions[package] = run.stdout.strip() or "not installed"
        except FileNotFoundError:
            versions[package] = "unknown"
    return versions


def build(icons_root: Path, out: Path, size: int, min_themes: int, seed: int) -> dict[str, object]:
    """Write the images, ``dataset.csv`` and ``themes.json``; return the summary written to ``themes.json``."""
    missing = [theme for theme in THEMES if not (icons_root / theme).is_dir()]
    if missing:
        packages = " ".join(sorted({THEMES[t] for t in missing}))
        raise SystemExit(f"icon themes {', '.join(missing)} not under {icons_root}: apt-get install {packages}")
    drawings = preferred([icon for theme in THEMES for icon in scan(icons_root, theme)])
    by_name: dict[str, list[Icon]] = defaultdict(list)
    seen: set[str] = set()
    images: dict[tuple[str, str], Image.Image] = {}
    for key in sorted(drawings):  # (theme, name): a copy is dropped in favour of the theme first in this order
        image = render(drawings[key], size)
        digest = hashlib.sha256(image.tobytes()).hexdigest()
        if digest not in seen:
            seen.add(digest)
            images[key] = image
            by_name[key[1]].append(drawings[key])
    names = sorted(name for name, icons in by_name.items() if len({i.theme for i in icons}) >= min_themes)
    shuffled = names.copy()
    random.Random(seed).shuffle(shuffled)
    train = set(shuffled[: len(shuffled) // 2])
    rows = []
    for name in names:
        context = context_of(by_name[name])
        family = f"{context}/{name.split('-')[0]}"
        for icon in sorted(by_name[name], key=lambda i: i.theme):
            relative = Path("images", icon.theme, context, f"{name}.png")
            (out / relative).parent.mkdir(parents=True, exist_ok=True)
            images[(icon.theme, name)].save(out / relative)
            rows.append([relative.as_posix(), name, family, context, "train" if name in train else "test"])
    with open(out / "dataset.csv", "w", newline="") as handle:
        csv.writer(handle, lineterminator="\n").writerows([["path", "label", "family", "context", "split"], *rows])
    summary: dict[str, object] = {
        "packages": package_versions(set(THEMES.values())),
        "size": size, "min_themes": min_themes, "seed": seed,
        "classes": {"train": len(train), "test": len(names) - len(train)},
        "images": dict(Counter(row[4] for row in rows)),
        "images_per_theme": dict(sorted(Counter(row[0].split("/")[1] for row in rows).items())),
        "contexts": dict(sorted(Counter(row[3] for row in rows).items())),
        "csv_sha256": hashlib.sha256((out / "dataset.csv").read_bytes()).hexdigest(),
    }
    (out / "themes.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("data/icons"), help="output folder (default data/icons)")
    parser.add_argument("--icons-root", type=Path, default=Path("/usr/share/icons"))
    parser.add_argument("--size", type=int, default=64, help="side of the written images in pixels (default 64)")
    parser.add_argument("--min-themes", type=int, default=3, help="themes that must draw a name (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the train/test class split (default 0)")
    args = parser.parse_args()
    summary = build(args.icons_root, args.out, args.size, args.min_themes, args.seed)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
