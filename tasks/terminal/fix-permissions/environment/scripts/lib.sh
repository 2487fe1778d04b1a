# Shared shell functions; sourced by the other scripts, never run directly.
log() { printf '%s %s\n' "$(date -u +%FT%TZ)" "$*"; }
