"""Colour-style object names for Dark Treasure Rooms (docs/methods/envs.md#dark-treasure-rooms).

Doors and balls carry unique colour names so that names say nothing about where rewards are.
The list holds the CSS/X11 colour names in snake_case (grey spellings and exact synonyms
left out) plus the paper's own examples (tangerine, apricot, cerulean, rosewood, ...) and a few
more common colour words. None contains an object type word (door, ball, key, box), so a name
and its type never run into each other when a reply is parsed.

Frozen layouts store their names, so editing this list never changes a saved layout; it only
changes layouts generated afresh from a seed.
"""

from __future__ import annotations

COLOURS: tuple[str, ...] = (
    "alice_blue", "antique_white", "aqua", "aquamarine", "azure", "beige", "bisque", "black",
    "blanched_almond", "blue", "blue_violet", "brown", "burly_wood", "cadet_blue", "chartreuse",
    "chocolate", "coral", "cornflower_blue", "cornsilk", "crimson", "dark_blue", "dark_cyan",
    "dark_goldenrod", "dark_gray", "dark_green", "dark_khaki", "dark_magenta",
    "dark_olive_green", "dark_orange", "dark_orchid", "dark_red", "dark_salmon",
    "dark_sea_green", "dark_slate_blue", "dark_slate_gray", "dark_turquoise", "dark_violet",
    "deep_pink", "deep_sky_blue", "dim_gray", "dodger_blue", "firebrick", "floral_white",
    "forest_green", "fuchsia", "gainsboro", "ghost_white", "gold", "goldenrod", "gray", "green",
    "green_yellow", "honeydew", "hot_pink", "indian_red", "indigo", "ivory", "khaki", "lavender",
    "lavender_blush", "lawn_green", "lemon_chiffon", "light_blue", "light_coral", "light_cyan",
    "light_goldenrod", "light_gray", "light_green", "light_pink", "light_salmon",
    "light_sea_green", "light_sky_blue", "light_slate_gray", "light_steel_blue", "light_yellow",
    "lime", "lime_green", "linen", "magenta", "maroon", "medium_aquamarine", "medium_blue",
    "medium_orchid", "medium_purple", "medium_sea_green", "medium_slate_blue",
    "medium_spring_green", "medium_turquoise", "medium_violet_red", "midnight_blue",
    "mint_cream", "misty_rose", "moccasin", "navajo_white", "navy", "old_lace", "olive",
    "olive_drab", "orange", "orange_red", "orchid", "pale_goldenrod", "pale_green",
    "pale_turquoise", "pale_violet_red", "papaya_whip", "peach_puff", "peru", "pink", "plum",
    "powder_blue", "purple", "rebecca_purple", "red", "rosy_brown", "royal_blue",
    "saddle_brown", "salmon", "sandy_brown", "sea_green", "seashell", "sienna", "silver",
    "sky_blue", "slate_blue", "slate_gray", "snow", "spring_green", "steel_blue", "tan", "teal",
    "thistle", "tomato", "turquoise", "violet", "wheat", "white", "white_smoke", "yellow",
    "yellow_green",
    # the paper's examples that are not CSS names, and more common colour words
    "tangerine", "apricot", "cerulean", "rosewood", "amber", "auburn", "burgundy", "carmine",
    "celadon", "cobalt", "copper", "emerald", "jade", "lilac", "mauve", "ochre", "periwinkle",
    "puce", "russet", "saffron", "sepia", "taupe", "umber", "vermilion", "scarlet", "sapphire",
    "ruby", "mahogany", "mustard", "eggplant", "charcoal", "cream", "denim", "fern", "mint",
    "peach", "raspberry", "cinnabar", "viridian", "ultramarine",
)

assert len(set(COLOURS)) == len(COLOURS), "duplicate colour names"
