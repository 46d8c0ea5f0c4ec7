# Sluice's developer commands. `make test` is what CI runs.
GO ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: test vet bench bench-peers lint fmt

## test: vet, then run every test with the race detector in random order
test: vet
	$(GO) test -race -shuffle=on ./...

vet:
	$(GO) vet ./...

## bench: the hot paths of the library, with allocations
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

## bench-peers: Sluice side by side with x/time/rate, httprate, ulule/limiter and go-limiter
bench-peers:
	cd bench && $(GO) test -run '^$$' -bench . -benchmem -count 5 -cpu 2

## lint: formatting, vet and staticcheck
lint: vet
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	$(GO) run $(STATICCHECK) ./...

fmt:
	gofmt -w $$(git ls-files '*.go')
