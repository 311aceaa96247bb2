"""``ranklit index --config C --ckpt_path K --images DIR|CSV --output I``: embed images into a search index folder.

The images are embedded batch by batch with a progress bar (Lightning's predict loop; ``--devices N`` splits them
between processes) into descriptor shards, with their paths, the network and its card (:mod:`ranklit.deploy._index`).
A CSV with a ``split`` column (training and evaluation images together) needs ``--split`` (``test``, ``gallery``,
... or ``all``): which images to index is asked, never guessed. Re-running the same command after an interruption
continues where it stopped; a second ``ranklit index`` into the same folder while one runs is refused, naming it
(``.<output>.lock`` beside the folder). ``--backend ivf`` (``flat``, ``hnsw``, ``pq``; ``pip install
"ranklit[faiss]"``) adds a faiss structure for large indexes; ``--evaluate`` prints its recall@k against the exact
search on a sample of the indexed images.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ranklit.cli._export_command import CommandParser, add_model_options, model_from_options
from ranklit.cli._flags import add_boolean
from ranklit.deploy import BACKENDS

__all__ = ["arguments", "main"]


def arguments() -> argparse.ArgumentParser:
    """The options of ``ranklit index``."""
    parser = CommandParser(prog="ranklit index", description=__doc__.splitlines()[0].replace("``", ""))
    add_model_options(parser)
    parser.add_argument("--images", required=True, type=Path, help="a folder of images (any depth) or a CSV file "
                        "with a `path` column (paths relative to its folder)")
    parser.add_argument("--split", default=None, help="the rows of a CSV with a `split` column to index (e.g. test, "
                        "gallery; `all`: every row); required for such a CSV")
    parser.add_argument("--output", required=True, type=Path, help="the index folder to write (or to resume)")
    parser.add_argument("--batch_size", type=int, default=64, help="images embedded at a time")
    parser.add_argument("--num_workers", type=int, default=0, help="image-loading processes")
    parser.add_argument("--accelerator", default="auto", help="Lightning accelerator (cpu, gpu, auto)")
    parser.add_argument("--devices", default="1", help="Lightning devices (e.g. 2: two processes)")
    parser.add_argument("--block_rows", type=int, default=50_000, help="images per resumable block")
    parser.add_argument("--backend", choices=BACKENDS, default="exact", help="search structure (faiss unless exact)")
    parser.add_argument("--nlist", type=int, default=None, help="ivf/pq cells (default: 4 sqrt(N))")
    parser.add_argument("--nprobe", type=int, default=16, help="ivf/pq cells visited per query")
    parser.add_argument("--m", type=int, default=None, help="hnsw links per node (32) or pq bytes per vector (D/8)")
    add_boolean(parser, "--evaluate", default=False, help="print the faiss backend's recall@k vs exact")
    parser.add_argument("--evaluate_k", type=int, default=10, help="k of --evaluate")
    parser.add_argument("--evaluate_queries", type=int, default=1000, help="indexed images used as queries")
    parser.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    return parser


def main(args: list[str]) -> None:
    """``ranklit index ...`` (``args`` after ``index``)."""
    parser = arguments()
    options = parser.parse_args(args)
    if options.evaluate and options.backend == "exact":
        parser.error("--evaluate measures a faiss backend against the exact search: add --backend ivf (or flat, hnsw, "
                     "pq).")
    from ranklit.callbacks import lock_output  # after parsing: `--help` is immediate
    from ranklit.cli._resuming import rank_zero_process
    from ranklit.deploy import add_faiss, build_index, evaluate_recall

    if rank_zero_process():  # one `ranklit index` per output folder (the ranks of a multi-device run: rank 0)
        lock_output(options.output, "ranklit index")
    model = model_from_options(options, "index")
    devices = int(options.devices) if options.devices.isdigit() else options.devices
    card = build_index(
        model, options.images, options.output, batch_size=options.batch_size, num_workers=options.num_workers,
        accelerator=options.accelerator, devices=devices, block_rows=options.block_rows, progress=options.progress,
        split=options.split,
    )
    if not card["index"]["complete"]:
        return  # a process of a multi-device run other than the first: the first one finishes the index
    if options.backend != "exact":
        card = add_faiss(options.output, options.backend, nlist=options.nlist, m=options.m, nprobe=options.nprobe)
    sys.stdout.write(f"indexed {card['index']['count']} images into {options.output} "
                     f"(backend {card['index']['backend']})\n")
    if options.evaluate:
        result = evaluate_recall(options.output, k=options.evaluate_k, queries=options.evaluate_queries)
        sys.stdout.write(
            f"recall@{result['k']} of {result['factory']} (nprobe {result['nprobe']}) vs exact search: "
            f"{result['recall']:.4f} over {result['queries']} queries; {result['faiss_ms_per_query']:.3f} ms/query "
            f"vs {result['exact_ms_per_query']:.3f} ms/query exact\n"
        )
