# The two commands of the README: `make run` and `make test`. Both install what they need.
SWIFT ?= swift
.PHONY: deps build run test format format-check dist bench soak sanitize fuzz clean

deps:
	@scripts/install-deps.sh

build: deps
	$(SWIFT) build

run: deps
	$(SWIFT) build -c release
	SWIFT=$(SWIFT) scripts/run-local.sh

## Every test: unit tests of each module and the end-to-end tests through nginx, Apache, CGI.
## First the formatter's check: code that departs from .swift-format fails it.
test: deps format-check
	WITH_TESTS=1 scripts/install-deps.sh
	$(SWIFT) build
	CW_BIN_DIR=$$($(SWIFT) build --show-bin-path) $(SWIFT) test

## The house style (.swift-format, the toolchain's swift-format): rewrite, or only list departures.
format:
	$(SWIFT) format -i -r Sources Tests

format-check:
	$(SWIFT) format lint --strict -r Sources Tests

dist: deps
	scripts/dist.sh

bench: deps
	WITH_BENCH=1 scripts/install-deps.sh
	bench/run.sh

## The long reliability runs: 60 s of mixed load, then 60 s of creation with a worker killed
## every second. Both need wrk, which `deps` leaves to the benchmarks.
soak: deps
	WITH_BENCH=1 scripts/install-deps.sh
	$(SWIFT) build -c release
	bench/soak.sh
	bench/crash.sh

## Every test on ThreadSanitizer and AddressSanitizer builds (scripts/sanitize.sh; not in make test).
sanitize: deps
	scripts/sanitize.sh

## The request parsers under libFuzzer for FUZZ_SECONDS (60); new inputs go to fuzz/corpus.
fuzz: deps
	fuzz/run.sh $(or $(FUZZ_SECONDS),60)

clean:
	rm -rf .build dist var
