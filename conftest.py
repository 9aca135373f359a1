# The GPU skip logic lives in tests/conftest.py; importing its hook here makes it apply to the
# notebooks/ folder too (pytest loads a conftest only for the folders it collects from).
from tests.conftest import gpu_available, pytest_collection_modifyitems  # noqa: F401
