# Writes the malformed corpus tests/data/json/bad/*.json and prints the C table of test_json.c:
# {file, expected result, expected JSON path, line, col}. Each case mutates one spot of a valid
# program (golden/small.json plus a target and pages); line:col is computed here from a marker
# that locates the offending byte, independently of the C parser.
# Run from the repository root: python3 tests/data/json/make_bad.py > table.inc
import os
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, 'bad')
small = open(os.path.join(HERE, 'golden', 'small.json'), 'rb').read()
base = small.replace(b'"target": null', b'"target": {"name": "h100", "sm_arch": 90, "num_sms": 132, "smem_bytes_per_sm": 233472, "smem_bytes_per_block_optin": 232448, "regs_per_sm": 65536, "max_threads_per_sm": 2048, "max_regs_per_thread": 255, "l2_bytes": 52428800, "hbm_bytes": 85899345920, "hbm_bandwidth_gbs": 3350.0, "fp16_tflops": 989.4, "clock_ghz": 1.98, "supports_cooperative": true, "wddm_tdr": false, "note": ""}')
base = base.replace(b'"pages": null', b'"pages": {\n    "buffer_to_page": {"2": 0},\n    "pages": [\n      {"id": 0, "space": "GLOBAL_SCRATCH", "nbytes": 64, "live_start": 0, "live_end": 1}\n    ]\n  }')
cases = []
def rep(old, new, text=None):
    t = base if text is None else text
    old = old.encode() if isinstance(old, str) else old
    new = new.encode() if isinstance(new, str) else new
    assert t.count(old) >= 1, old
    return t.replace(old, new, 1)
def add(name, data, result, path, at):
    """at: a marker (its first occurrence is the error spot), (marker, offset), "end", or (line, col)"""
    data = data.encode() if isinstance(data, str) else data
    if at == 'end':
        off = len(data)
    elif isinstance(at, tuple) and isinstance(at[0], int):
        cases.append((name, data, result, path, at)); return
    elif isinstance(at, tuple):
        m = at[0].encode() if isinstance(at[0], str) else at[0]
        off = data.find(m); assert off >= 0, (name, m); off += at[1]
    else:
        m = at.encode() if isinstance(at, str) else at
        off = data.find(m); assert off >= 0, (name, m)
    line = data.count(b'\n', 0, off) + 1
    col = off - (data.rfind(b'\n', 0, off) + 1) + 1
    cases.append((name, data, result, path, (line, col)))

P, V = 'AMK_ERR_PARSE', 'AMK_ERR_VERSION'
# --- truncated at many points
add('trunc_empty', b'', P, '', 'end')
add('trunc_ws_only', b'  \n ', P, '', 'end')
add('trunc_in_root_key', base[:base.find(b'ir_version') + 4], P, '', 'end')
i = base.find(b'"name": "x"') + 10
add('trunc_in_string', base[:i], P, '/buffers/0/name', 'end')
add('trunc_after_comma', base[:base.find(b'{"id": 1, "name": "norm.w"')], P, '/buffers/1', 'end')
i = base.find(b'"source": null') + 12
add('trunc_in_literal', base[:i], P, '/buffers/0/source', 'end')
i = base.find(b'"threshold": 1') + 13
add('trunc_in_number', base[:i], P, '/tasks/1/waits/0/threshold', 'end')
i = base.find(b'"eps": 1e-05') + 10
add('trunc_in_exponent', base[:i], P, '/tasks/0/params/eps', 'end')
add('trunc_before_close', base.rstrip()[:-1], P, '', 'end')
# --- top level and version
add('not_object', b'[1, 2]\n', P, '', (1, 1))
add('top_null', b'null', P, '', (1, 1))
add('ir_version_missing', rep('"ir_version": "0.2.0",\n  ', ''), P, '/ir_version', (1, 1))
add('ir_version_int', rep('"ir_version": "0.2.0"', '"ir_version": 0'), P, '/ir_version', '0,')
add('ir_version_two_parts', rep('"ir_version": "0.2.0"', '"ir_version": "0.2"'), P, '/ir_version', '"0.2"')
add('ir_version_major', rep('"ir_version": "0.2.0"', '"ir_version": "1.0.0"'), V, '/ir_version', '"1.0.0"')
add('abi_version_int', rep('"abi_version": "0.2"', '"abi_version": 0.2'), P, '/abi_version', '0.2,')
add('tasks_missing', rep(b'"tasks": [', b'"tazks": ['), P, '/tasks', (1, 1))
add('buffers_object', rep('"buffers": [', '"buffers": {"a": [').replace(b'\n  ],\n  "counters"', b'\n  ]},\n  "counters"', 1), P, '/buffers', '{"a"')
add('dup_top_key', rep('"target": {', '"tasks": [],\n  "target": {'), P, '/tasks', '"tasks": [\n')
add('meta_array', rep('"meta": {"model": "small"}', '"meta": ["small"]'), P, '/meta', '["small"]')
add('meta_null', rep('"meta": {"model": "small"}', '"meta": null'), P, '/meta', 'null')
# --- buffers
add('buffer_null', rep('{"id": 0, "name": "x"', 'null, {"id": 0, "name": "x"'), P, '/buffers/0', 'null, {')
add('buffer_id_string', rep('{"id": 0, "name": "x"', '{"id": "0", "name": "x"'), P, '/buffers/0/id', '"0"')
add('buffer_id_real', rep('{"id": 0, "name": "x"', '{"id": 0.0, "name": "x"'), P, '/buffers/0/id', '0.0, "name": "x"')
add('buffer_id_bool', rep('{"id": 0, "name": "x"', '{"id": false, "name": "x"'), P, '/buffers/0/id', 'false, "name"')
add('buffer_id_dup', rep('{"id": 1, "name": "norm.w"', '{"id": 0, "name": "norm.w"'), P, '/buffers/1/id', '0, "name": "norm.w"')
add('buffer_id_range', rep('{"id": 5, "name": "z"', '{"id": 6, "name": "z"'), P, '/buffers/5/id', '6, "name": "z"')
add('buffer_id_missing', rep('{"id": 0, "name": "x"', '{"name": "x"'), P, '/buffers/0/id', '{"name": "x"')
add('buffer_dtype_unknown', rep('"dtype": "F32"', '"dtype": "F64"'), P, '/buffers/0/dtype', '"F64"')
add('buffer_kind_lowercase', rep('"kind": "IO_INPUT"', '"kind": "io_input"'), P, '/buffers/0/kind', '"io_input"')
add('buffer_kind_code', rep('"kind": "IO_INPUT"', '"kind": 3'), P, '/buffers/0/kind', '3, "dtype"')
add('buffer_space_unknown', rep('"space": "GLOBAL_SCRATCH"', '"space": "L2"'), P, '/buffers/2/space', '"L2"')
add('buffer_shape_string', rep('"shape": [1, 16]', '"shape": "1,16"'), P, '/buffers/0/shape', '"1,16"')
add('buffer_shape_negative', rep('"shape": [16]', '"shape": [-16]'), P, '/buffers/1/shape/0', '-16')
add('buffer_shape_real', rep('"shape": [16]', '"shape": [16.0]'), P, '/buffers/1/shape/0', '16.0')
add('buffer_shape_rank5', rep('"shape": [16]', '"shape": [1, 1, 1, 1, 16]'), P, '/buffers/1/shape', '[1, 1, 1, 1, 16]')
add('buffer_numel_overflow', rep('"shape": [16]', '"shape": [4294967296, 4294967296]'), P, '/buffers/1/shape', '[4294967296')
add('buffer_bytes_overflow', rep('"shape": [16]', '"shape": [1152921504606846976]'), P, '/buffers/1/shape', '[1152921504606846976]')
add('buffer_dim_huge', rep('"shape": [16]', '"shape": [9223372036854775808]'), P, '/buffers/1/shape/0', '9223372036854775808')
add('buffer_unknown_key', rep('"source": "norm.weight"}', '"source": "norm.weight", "stride": [1]}'), P, '/buffers/1/stride', '[1]}')
add('buffer_name_missing', rep('{"id": 0, "name": "x", ', '{"id": 0, '), P, '/buffers/0/name', '{"id": 0, "kind"')
add('buffer_name_null', rep('"name": "x"', '"name": null'), P, '/buffers/0/name', 'null, "kind"')
add('buffer_source_int', rep('"source": "norm.weight"', '"source": 7'), P, '/buffers/1/source', '7}')
add('buffer_name_nul', rep('"name": "x"', '"name": "x\\u0000y"'), P, '/buffers/0/name', '"x\\u')
# --- counters
add('counter_init_above_u32', rep('{"id": 0, "init": 0', '{"id": 0, "init": 4294967296'), P, '/counters/0/init', '4294967296')
add('counter_init_negative', rep('{"id": 0, "init": 0', '{"id": 0, "init": -1'), P, '/counters/0/init', '-1')
add('counter_init_real', rep('{"id": 0, "init": 0', '{"id": 0, "init": 0.0'), P, '/counters/0/init', '0.0, "note"')
add('counter_note_null', rep('"note": "norm"', '"note": null'), P, '/counters/0/note', ('"note": null', 8))
add('counter_id_dup', rep('{"id": 2, "init": 0, "note": "add"}', '{"id": 1, "init": 0, "note": "add"}'), P, '/counters/2/id', '1, "init": 0, "note": "add"')
add('counter_unknown_key', rep('"note": "norm"}', '"note": "norm", "producers": 1}'), P, '/counters/0/producers', '1}')
# --- tasks
add('task_null', rep('{"id": 0, "op": "RMSNORM"', 'null, {"id": 0, "op": "RMSNORM"'), P, '/tasks/0', 'null, {"id": 0, "op"')
add('task_unknown_key', rep('"label": "norm"}', '"label": "norm", "priority": 1}'), P, '/tasks/0/priority', '1}')
add('task_id_dup', rep('{"id": 1, "op": "GEMV_TILE"', '{"id": 0, "op": "GEMV_TILE"'), P, '/tasks/1/id', '0, "op": "GEMV')
add('task_id_range', rep('{"id": 2, "op": "ADD"', '{"id": 3, "op": "ADD"'), P, '/tasks/2/id', '3, "op": "ADD"')
add('task_id_negative', rep('{"id": 2, "op": "ADD"', '{"id": -1, "op": "ADD"'), P, '/tasks/2/id', '-1, "op": "ADD"')
add('task_op_int', rep('"op": "ADD"', '"op": 11'), P, '/tasks/2/op', '11,')
add('task_op_missing', rep('"op": "ADD", ', ''), P, '/tasks/2/op', '{"id": 2, "inputs"')
add('task_input_missing_buffer', rep('"inputs": [4, 0]', '"inputs": [4, 9]'), P, '/tasks/2/inputs/1', '9]')
add('task_input_real', rep('"inputs": [4, 0]', '"inputs": [4, 0.0]'), P, '/tasks/2/inputs/1', '0.0]')
add('task_input_bool', rep('"inputs": [4, 0]', '"inputs": [4, true]'), P, '/tasks/2/inputs/1', 'true]')
add('task_outputs_not_array', rep('"outputs": [5]', '"outputs": 5'), P, '/tasks/2/outputs', '5, "out_counter"')
add('task_out_counter_range', rep('"out_counter": 2', '"out_counter": 3'), P, '/tasks/2/out_counter', '3, "waits"')
add('task_out_counter_null', rep('"out_counter": 2', '"out_counter": null'), P, '/tasks/2/out_counter', 'null, "waits"')
add('task_wait_counter_range', rep('{"counter": 1, "threshold": 1}', '{"counter": 7, "threshold": 1}'), P, '/tasks/2/waits/0/counter', '7, "threshold"')
add('task_wait_threshold_string', rep('{"counter": 1, "threshold": 1}', '{"counter": 1, "threshold": "1"}'), P, '/tasks/2/waits/0/threshold', '"1"}')
add('task_wait_threshold_huge', rep('{"counter": 1, "threshold": 1}', '{"counter": 1, "threshold": 9223372036854775808}'), P, '/tasks/2/waits/0/threshold', '9223372036854775808')
add('task_wait_unknown_key', rep('{"counter": 1, "threshold": 1}', '{"counter": 1, "threshold": 1, "timeout": 5}'), P, '/tasks/2/waits/0/timeout', '5}')
add('task_wait_missing_threshold', rep('{"counter": 1, "threshold": 1}', '{"counter": 1}'), P, '/tasks/2/waits/0/threshold', '{"counter": 1}')
add('task_waits_object', rep('"waits": [{"counter": 1, "threshold": 1}]', '"waits": {"counter": 1, "threshold": 1}'), P, '/tasks/2/waits', '{"counter": 1')
add('task_params_nested_array', rep('"params": {"K": 16,', '"params": {"K": [16],'), P, '/tasks/1/params/K', '[16], "N_tile"')
add('task_params_nested_object', rep('"params": {}', '"params": {"x": {"y": 1}}'), P, '/tasks/2/params/x', '{"y"')
add('task_params_array', rep('"params": {}', '"params": []'), P, '/tasks/2/params', '[], "sm"')
add('task_params_big_int', rep('"params": {"K": 16,', '"params": {"K": 100000000000000000000,'), P, '/tasks/1/params/K', '100000000000000000000')
add('task_params_dup_key', rep('"params": {"K": 16,', '"params": {"K": 16, "K": 32,'), P, '/tasks/1/params/K', '"K": 32')
add('task_sm_negative', rep('"sm": null, "est_bytes": 0', '"sm": -1, "est_bytes": 0'), P, '/tasks/2/sm', '-1, "est_bytes": 0')
add('task_sm_string', rep('"sm": null, "est_bytes": 0', '"sm": "0", "est_bytes": 0'), P, '/tasks/2/sm', '"0", "est_bytes": 0')
add('task_est_bytes_negative', rep('"est_bytes": 64', '"est_bytes": -64'), P, '/tasks/0/est_bytes', '-64')
add('task_label_null', rep('"label": "norm"', '"label": null'), P, '/tasks/0/label', ('"label": null', 9))
# --- target
add('target_name_too_long', rep('"name": "h100"', '"name": "' + 'h' * 64 + '"'), P, '/target/name', '"hhhh')
add('target_note_too_long', rep('"note": ""}', '"note": "' + 'n' * 128 + '"}'), P, '/target/note', '"nnnn')
add('target_num_sms_real', rep('"num_sms": 132', '"num_sms": 132.0'), P, '/target/num_sms', '132.0')
add('target_num_sms_overflow', rep('"num_sms": 132', '"num_sms": 2147483648'), P, '/target/num_sms', '2147483648')
add('target_cooperative_int', rep('"supports_cooperative": true', '"supports_cooperative": 1'), P, '/target/supports_cooperative', '1, "wddm')
add('target_bandwidth_string', rep('"hbm_bandwidth_gbs": 3350.0', '"hbm_bandwidth_gbs": "3350"'), P, '/target/hbm_bandwidth_gbs', '"3350"')
add('target_string', rep(b'"target": {', b'"target": "h100", "x": {'), P, '/target', '"h100", "x"')
# --- pages
add('pages_missing_page', rep('"buffer_to_page": {"2": 0}', '"buffer_to_page": {"2": 1}'), P, '/pages/buffer_to_page/2', ('"2": 1}', 5))
add('pages_bad_key', rep('"buffer_to_page": {"2": 0}', '"buffer_to_page": {"h": 0}'), P, '/pages/buffer_to_page/h', ('"h": 0}', 5))
add('pages_key_leading_zero', rep('"buffer_to_page": {"2": 0}', '"buffer_to_page": {"02": 0}'), P, '/pages/buffer_to_page/02', ('"02": 0}', 6))
add('pages_key_no_buffer', rep('"buffer_to_page": {"2": 0}', '"buffer_to_page": {"6": 0}'), P, '/pages/buffer_to_page/6', ('"6": 0}', 5))
add('pages_page_id_dup', rep('"live_end": 1}\n', '"live_end": 1},\n      {"id": 0, "space": "SMEM", "nbytes": 8}\n'), P, '/pages/pages/1/id', '0, "space": "SMEM"')
add('pages_nbytes_negative', rep('"nbytes": 64', '"nbytes": -64'), P, '/pages/pages/0/nbytes', '-64')
add('pages_missing_list', rep(',\n    "pages": [\n      {"id": 0, "space": "GLOBAL_SCRATCH", "nbytes": 64, "live_start": 0, "live_end": 1}\n    ]', ''), P, '/pages/pages', '{\n    "buffer_to_page"')
# --- config
add('config_sm_assignment_unknown', rep('"sm_assignment": "round_robin"', '"sm_assignment": "greedy"'), P, '/config/sm_assignment', '"greedy"')
add('config_sm_assignment_bad_key', rep('"sm_assignment": "round_robin"', '"sm_assignment": {"0": 1, "one": 2}'), P, '/config/sm_assignment/one', '2}')
add('config_sm_assignment_negative', rep('"sm_assignment": "round_robin"', '"sm_assignment": {"0": -1}'), P, '/config/sm_assignment/0', '-1}')
add('config_page_allocation_unknown', rep('"page_allocation": "none"', '"page_allocation": "greedy"'), P, '/config/page_allocation', '"greedy"')
add('config_tiling_real', rep('"tiling": {}', '"tiling": {"gemv": {"N_tile": 256.0}}'), P, '/config/tiling/gemv/N_tile', '256.0')
add('config_tiling_slash_key', rep('"tiling": {}', '"tiling": {"a/b~c": 5}'), P, '/config/tiling/a~1b~0c', '5}')
add('config_fusion_flat', rep('"fusion_grouping": []', '"fusion_grouping": ["RMSNORM"]'), P, '/config/fusion_grouping/0', ('["RMSNORM"]', 1))
add('config_threads_string', rep('"threads_per_block": 128', '"threads_per_block": "128"'), P, '/config/threads_per_block', '"128"')
# --- syntax and encoding
# the 65th open container (root, meta, then the 63rd '[') is one too deep
add('deep_nesting', rep('"meta": {"model": "small"}', '"meta": {"model": ' + '[' * 70 + ']' * 70 + '}'), P,
    '/meta/model' + '/0' * 62, ('[' * 70, 62))
add('invalid_utf8', rep('"name": "x"', b'"name": "x\xc3\x28"'), P, '/buffers/0/name', b'\xc3')
add('overlong_utf8', rep('"name": "x"', b'"name": "\xc0\xaf"'), P, '/buffers/0/name', b'\xc0')
add('utf8_surrogate_bytes', rep('"label": "norm"', b'"label": "\xed\xa0\x80"'), P, '/tasks/0/label', b'\xed')
add('lone_surrogate_escape', rep('"label": "norm"', '"label": "\\ud800x"'), P, '/tasks/0/label', '\\ud800')
add('raw_control_char', rep('"label": "norm"', '"label": "no\trm"'), P, '/tasks/0/label', '\trm')
add('trailing_comma_array', rep('"label": "residual"}\n  ]', '"label": "residual"},\n  ]'), P, '/tasks', ('  ],\n  "pages"', 2))
add('trailing_comma_object', rep('"note": "norm"}', '"note": "norm",}'), P, '/counters/0', ('"norm",}', 7))
add('comment', b'// program\n' + base, P, '', (1, 1))
add('nan_param', rep('"eps": 1e-05', '"eps": NaN'), P, '/tasks/0/params/eps', 'NaN')
add('infinity_param', rep('"eps": 1e-05', '"eps": -Infinity'), P, '/tasks/0/params/eps', '-Infinity')
add('leading_zero', rep('"hidden": 16', '"hidden": 016'), P, '/tasks/0/params/hidden', '016')
add('real_overflow', rep('"eps": 1e-05', '"eps": 1e400'), P, '/tasks/0/params/eps', '1e400')
add('single_quotes', rep('"model": "small"', "'model': \"small\""), P, '/meta', "'model'")
add('garbage_after', base + b'x', P, '', (len(base.split(b'\n')), 1))
add('second_value', base + base, P, '', (len(base.split(b'\n')), 1))
add('bom', b'\xef\xbb\xbf' + base, P, '', (1, 1))
add('missing_colon', rep('"model": "small"', '"model" "small"'), P, '/meta/model', '"small"')
add('missing_comma', rep('"name": "x", "kind"', '"name": "x" "kind"'), P, '/buffers/0', '"kind": "IO_INPUT"')
add('bad_escape', rep('"label": "norm"', '"label": "\\x41"'), P, '/tasks/0/label', '\\x41')
add('short_unicode_escape', rep('"label": "norm"', '"label": "\\u12"'), P, '/tasks/0/label', '\\u12')

os.makedirs(OUT, exist_ok=True)
names = set()
for name, data, result, path, (line, col) in cases:
    assert name not in names; names.add(name)
    open(os.path.join(OUT, name + '.json'), 'wb').write(data)
for name, data, result, path, (line, col) in cases:
    print('    {"%s", %s, "%s", %d, %d},' % (name, result, path, line, col))
