"""The ``scene`` domain: lay out a room as a JSON scene graph, checked geometrically.

A task gives a room, a library of named assets (boxes with sizes), materials and a request in
words with layout constraints; the model answers with a scene graph (objects with an asset, an
optional parent, a position, a yaw, a scale and a material) in a ```json block. The verifier
(:mod:`.verifier`) gates on structure (assets exist, ids unique, parents resolve without cycles,
numbers finite, scales sane), then credits physics (every object rests on the floor or a top,
nothing interpenetrates, everything is in the room) and the task's constraints (counts, left/
right/in front/behind, on top of, near, distance ranges, facing, against a wall, material).

Modules: :mod:`.schema` (the scene graph and task records, and the coordinate conventions),
:mod:`.geometry` (world boxes and exact measures), :mod:`.verifier`, :mod:`.generators`
(seeded tasks in three tiers, each with a reference scene that scores 1), :mod:`.env` (prompt,
source, environment), :mod:`.render` (meshes and a PNG of a scene, through
:mod:`practicum.render3d`). docs/scene.md documents the options and the task file format of
``practicum verify scene``.
"""

from practicum.domains.scene.plugin import SceneOptions, ScenePlugin, load_task, plugin
from practicum.domains.scene.schema import Scene, SceneObject, SceneTask

__all__ = ["Scene", "SceneObject", "SceneOptions", "ScenePlugin", "SceneTask", "load_task", "plugin"]
