"""The dtype names, under numpy's names and PyTorch's: `tg.tensor(ids, dtype=tg.long)`.
Each is numpy's scalar type, so `t.dtype == tg.float32` holds. A module of its own because
these names (float, int, bool) would hide Python's built-ins in any module that holds them."""
import numpy as np

float16 = half = np.float16
float32 = float = np.float32
float64 = double = np.float64
int8, int16, uint8 = np.int8, np.int16, np.uint8
int32 = int = np.int32
int64 = long = np.int64
bool = np.bool_

NAMES = ("float16", "half", "float32", "float", "float64", "double", "int8", "int16", "uint8",
         "int32", "int", "int64", "long", "bool")
