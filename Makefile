# The two commands: `make run` (the whole system, in the foreground) and `make test` (every test).
SHELL := /bin/bash
.DEFAULT_GOAL := help

.PHONY: help setup build run demo test test-containers soak coverage fuzz format lint clean

help:
	@echo "make run       install what is missing, build, start Postgres, the broker, the five services and the gateway"
	@echo "make demo      (with make run going in another terminal) play a delivery and a technician visit through it"
	@echo "make test      the same set-up on other ports, then every test, then tear down"
	@echo "make test-containers  build the images, bring up docker-compose.yml with podman (two replicas of every"
	@echo "               service) and play the journeys through its gateway, then tear it all down"
	@echo "make soak      two instances of every service, parties living journeys, faults at random, then a check that"
	@echo "               nothing was lost or doubled (SOAK_MINUTES, default 10; SOAK_SEED repeats a run's faults)"
	@echo "make coverage  the tests with code coverage, line coverage per module"
	@echo "make fuzz      libFuzzer over the protocol parsers, FUZZ_SECONDS (default 60) per target; fails on a crash"
	@echo "make format    swift format the sources in place"
	@echo "make lint      fail on any swift format warning (CI runs it before the tests)"

setup:
	@deploy/local/setup.sh

build: setup
	swift build

run: build
	@deploy/local/run.sh

demo: setup
	@.local/venv/bin/python deploy/local/demo.py

test: setup
	@deploy/local/test.sh

test-containers: setup
	@deploy/containers/test.sh

soak: build
	@.local/venv/bin/python deploy/local/soak.py

coverage: setup
	@deploy/local/test.sh --coverage

fuzz: setup
	@deploy/local/fuzz.sh

format:
	swift format format --in-place --recursive --parallel Package.swift Shared Services Tools Tests Benchmarks

lint:
	swift format lint --strict --recursive --parallel Package.swift Shared Services Tools Tests Benchmarks

clean:
	rm -rf .build .local
