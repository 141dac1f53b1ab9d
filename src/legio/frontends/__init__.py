"""Front-ends: ``telegram`` and ``console`` talk to ``legio.app`` only; ``views`` renders
admin answers as text, with no engine behind it."""
