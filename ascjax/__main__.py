import sys

from .tools._compile_cache import enable_compile_cache
from .tools.cli import main

enable_compile_cache()  # a second run of the same kernel starts in seconds
sys.exit(main())
