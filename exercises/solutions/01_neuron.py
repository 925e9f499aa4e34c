"""Solutions to exercise 01: check.py --solutions puts these in place of the exercise's."""


def add_vjp(g, a, b):
    return g, g          # d(a+b)/da = 1, d(a+b)/db = 1: the sum passes g on unchanged


def mul_vjp(g, a, b):
    return g * b, g * a  # d(a·b)/da = b, d(a·b)/db = a: each input gets g times the other
