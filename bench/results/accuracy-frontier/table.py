#!/usr/bin/env python3
"""The summary table of accuracy-frontier.md from the JSON files spattn frontier wrote (stdlib only)."""
import json, sys
rows = []
for path in sys.argv[1:]:
    j = json.load(open(path))
    name = path.rsplit('/', 1)[-1][:-5]
    for m in j['methods']:
        cells = []
        for t in m['at_targets']:
            d = t['density']
            if d is None:
                cells += ['not reached', f"{t['oracle_density']:.3f}", '—']
            else:
                cells += [('≤' if t['how'] == 'at_most' else '') + f"{d:.3f}", f"{t['oracle_density']:.3f}",
                          f"{d / t['oracle_density']:.2f}×"]
        tiles = m.get('tiles', f"{m['tile_q']}x{m['tile_k']}")
        rows.append(f"| {name} | {m['method']} ({m['knob']}) | {tiles} | " + ' | '.join(cells) + ' |')
print('| workload | method (knob) | tiles | density @1e-2 | oracle @1e-2 | ratio | density @5e-2 | oracle @5e-2 | ratio |')
print('|---|---|---|---|---|---|---|---|---|')
print('\n'.join(rows))
