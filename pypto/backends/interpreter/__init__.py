"""The reference interpreter: Tile IR executed with numpy, one grid block after another.

It is the executable definition of every op in ``docs/tile_ir.md``; backends are tested
against it. ``numerics`` holds the meaning of values and dtypes (a leaf others may import),
``handlers`` the rule of each op, ``run`` the execution of a function over a grid, and
``sanitizer`` the checked launch built on it.
"""
