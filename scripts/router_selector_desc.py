"""The router's description with an action selector, a direct counter and
`random`, for crates/synapse-core/tests/generated.rs (the generated code's
action selector beside the interpreter's):

    python scripts/router_selector_desc.py > tests/data/p4/router-selector-desc.json

`MyIngress.ipv4_lpm` selects by crc16 over the IPv4 addresses and the
destination port among groups of 3 and 2 members (set_nhop or drop) and a
default group; `MyIngress.acl` gets a direct counter and a direct meter
(1 packet/s, bursts 2 and 4) whose colour egress's `color_tbl` reads;
`MyIngress.permit`
sets the DSCP byte at random.
"""
import json
from pathlib import Path
d = json.load(open(Path(__file__).parent.parent / "tests/data/p4/router-desc.json"))
slot = {f[0]: i for i, f in enumerate(d['fields'])}
d['externs']['selectors'] = [{'name': 'sel', 'algo': 'crc16', 'inputs': [['f', slot['ipv4.srcAddr']], ['f', slot['ipv4.dstAddr']], ['f', slot['scalars.l4_dport']]]}]
for n in d['nodes']:
    if n['name'] == 'MyIngress.ipv4_lpm':
        n['selector'] = 'sel'
        n['entries'][0]['g'] = [[1, ['0x5', '0x3']], [1, ['0x7', '0x4']], [2, []]]
        n['entries'][1]['g'] = [[1, ['0x7', '0x4']], [1, ['0x5', '0x2']]]
        n['default_group'] = [[1, ['0x7', '0x1']], [2, []]]
    if n['name'] == 'MyIngress.acl':
        n['counters'] = True
        n['meter'] = {'name': 'MyIngress.acl_meter', 'target': slot['scalars.color'], 'packets': True}
d['externs']['meters'] = [{'name': 'MyIngress.acl_meter', 'size': 2, 'packets': True, 'rates': [[-1, [[1e-06, 2], [1e-06, 4]]]]}]
for a in d['actions']:
    if a['name'] == 'MyIngress.permit':
        a['ops'].append(['extern', 'modify_field_rng_uniform', [['f', slot['ipv4.diffserv']], ['e', ['c', '0x0']], ['e', ['c', '0x3f']]]])
print(json.dumps(d))
