"""The same job's stated power against the drop the runlevels companion actually applies (issue 31).

``bench/runlevels.py``'s power companions take 20 points off the middle of the base CURVE and then add
the run level and the seed effect on the logit scale: at a level away from 0 the head's drop in
probability points is no longer 20 (smaller above, larger below, and smaller on average). The comparison
states its power for a drop of ``min_drop`` points at the base's measured rate
(``stats.power.power_as_run``). This prints, per curve and run sd, that statement averaged over the
levels (column "stated, 20 pt") and the same function priced at the drop the companion applies at each
level ("at the applied drop"): the second is what the companion can be expected to measure.

    python3 bench/power_drop_scale.py
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.runlevels import RUN_SDS, SEED_SD
from bench.verdicts import DEPTHS, SIZES, flat, middle_drop, u_shape
from needle_action.stats.groups import family, planning_group
from needle_action.stats.power import FINAL_SPEND, GroupDesign, group_power


def _logit(p: float) -> float:
    return math.log(p / (1 - p))


def _expit(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def main(levels: int = 400, trials: int = 20, drop: float = 0.2) -> None:
    cells = planning_group(SIZES, DEPTHS).cells
    design = GroupDesign(len(cells), len(family(SIZES, DEPTHS)), 0.01 * FINAL_SPEND)
    rng = np.random.default_rng(1)
    print("| curve | run sd | stated, 20 pt | at the applied drop |\n|---|--:|--:|--:|")
    for name, curve in (("flat .8", flat(0.8)), ("u .95/.6", u_shape(0.95, 0.6)), ("flat .95", flat(0.95))):
        head = middle_drop(curve, drop)
        for sd in RUN_SDS:
            stated = applied = 0.0
            for u in rng.normal(0.0, math.hypot(sd, SEED_SD), levels):
                base = float(np.mean([_expit(_logit(curve(d, s)) + u) for s, d in cells]))
                after = float(np.mean([_expit(_logit(head(d, s)) + u) for s, d in cells]))
                rate = round(base, 3)
                stated += group_power(design, trials=trials, base_rate=rate, drop=drop)
                applied += group_power(design, trials=trials, base_rate=rate, drop=round(base - after, 3))
            print(f"| {name} | {sd:g} | {stated / levels:.1%} | {applied / levels:.1%} |")


if __name__ == "__main__":
    main()
