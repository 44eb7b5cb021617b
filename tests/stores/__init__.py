"""Store backends: the contract every store passes, LMDB reliability, Redis."""
