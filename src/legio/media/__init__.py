"""Media: pictures for the model and voice notes to text, on this machine.

Modules:

- ``images``: pictures for the model (Pillow)
- ``listening``: Caesar's voice notes and audio heard
- ``voice``: voice notes to text on this machine (faster-whisper, CTranslate2)
"""
