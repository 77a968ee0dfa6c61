"""The nodes' epoch-2+ speed in a run folder of studies/partitioned_cache.sh (node*/REPORT.json),
shared by studies/partitioned_cache.sh and studies/partitioned_whatif.sh."""
import glob
import json
import os


def epochs2(run_dir):
    """Per node of a run folder: (img/s, CPU us per image or None) over epochs 2+ (the report's
    pipeline.epochs[] with epoch >= 1; nan img/s when they took no time)."""
    out = []
    for f in sorted(glob.glob(os.path.join(run_dir, "node*", "*.json"))):
        later = [e for e in json.load(open(f))["pipeline"]["epochs"] if e["epoch"] >= 1]
        secs = sum(e["seconds"] for e in later)
        imgs = sum(e["images"] for e in later)
        cpu = 1e6 * sum(e["cpu_s"] for e in later) / imgs if later and all("cpu_s" in e for e in later) and imgs else None
        out.append((imgs / secs if secs > 0 else float("nan"), cpu))
    return out
