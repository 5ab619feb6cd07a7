// The bench's baseline proxy (bench/sidecar.py --real): our own code, the standard library only.
module mkpolicy.test/peers/goproxy

go 1.26.0
