import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
KERNELS = ROOT / "kernels"
sys.path.insert(0, str(KERNELS))  # kernel files import as plain modules in tests
