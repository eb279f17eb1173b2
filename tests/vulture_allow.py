"""What vulture reports as unused in the production code but is used: the reviewed allow-list.

`tests/test_dead_code.py` runs vulture over kernels/, workbench/, bench/ and scripts/ with this
file; a new finding fails the suite until the code goes or an entry here says why it stays.
Each entry is a bare name vulture then counts as used.
"""
# ruff: noqa: B018, F821

# Loaded by name: the backend catalog ("module:Class") and the engine's "module:function" targets.
CutileBackend
FlashAttention4Backend
NaiveCupyBackend
ReferenceBackend
TorchFlashBackend
TorchCudnnBackend
child_call
child_group_point
run_in_child
child_check  # workbench.backends.plugin_reload: the plugin's import in a child of its own
cutile_cubin  # workbench.backends.plugin_compile: a plugin's compile_cubin calls it (examples/)
__getattr__  # the backends package's BACKEND_NAMES and GPU_BACKENDS, derived on each read

# Qt and pyqtgraph call these overrides and signal arguments.
closeEvent
columnCount
headerData
tickValues
tickStrings
logTickStrings
spacing
signum
frame
applied  # the PySide6 work-around's context manager, entered by the app module

# Dataclass fields and attributes that are stored or shown, not read back by name.
checked_rows
latency_min_ms
writeable
restarts
last_export
__annotations__
open_action
import_action
row_factory  # sqlite3.Connection's, set so rows read by name
export_csv_action
export_png_action

# A field of the bandwidth measurement, written to the machine file through asdict.
measured_at

# The NumPy reference's keyword entry (tile sizes, packing, splits by name): the tests check
# the kernel against it; the CPU backend walks the schedule it resolved (walk_schedule).
flash_attention

# The window's wording of a refusal (issue 52, item 4): the form's owner shows it in place of
# str(exc); tests/test_error_words.py checks it.
form_message

# The serving kernels' public calls (issue 54): the workbench's cuTile backend calls them; until
# it does, tests/gpu/test_serving_kernels.py does. Their offline compiles are for the CPU test
# of registers and spills (tests/test_serving_kernels_offline.py).
paged_attention
varlen_attention
compile_paged_cubin
compile_varlen_cubin
