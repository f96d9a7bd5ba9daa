# Sourced by the other scripts: where builds go.
# The target directory lives outside the clone, so a fresh clone on the same
# machine reuses earlier builds while a new machine still builds from scratch.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/weir/target}"
