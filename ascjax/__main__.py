import sys

from .cli import main
from .compile_cache import enable_compile_cache

enable_compile_cache()  # a second run of the same kernel starts in seconds
sys.exit(main())
