package storetest

import (
	"errors"
	"testing"

	"github.com/rowq/rowq/internal/store"
)

// routingTests are the conformance tests of store.RoutingStore.
var routingTests = []conformanceTest{
	{"Routing_PutGetListDelete", testRoutingCRUD},
	{"Routing_UnknownQueue", testRoutingUnknownQueue},
}

func testRoutingCRUD(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "qa")
	putQueue(t, s, "qb")
	if _, err := s.RoutingGet(ctx, "c1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("RoutingGet(missing) err = %v", err)
	}
	must(s.RoutingPut(ctx, &store.Routing{JobCategory: "c2", QueueName: "qa"}))(t)
	must(s.RoutingPut(ctx, &store.Routing{JobCategory: "c1", QueueName: "qa"}))(t)
	r := must(s.RoutingPut(ctx, &store.Routing{JobCategory: "c1", QueueName: "qb"}))(t)
	if r.QueueName != "qb" {
		t.Fatalf("RoutingPut returned %+v", r)
	}
	if r := must(s.RoutingGet(ctx, "c1"))(t); r.QueueName != "qb" {
		t.Fatalf("RoutingGet after replace = %+v", r)
	}
	list := must(s.RoutingList(ctx))(t)
	if len(list) != 2 || list[0].JobCategory != "c1" || list[1].JobCategory != "c2" {
		t.Fatalf("RoutingList = %+v", list)
	}
	if r := must(s.RoutingDelete(ctx, "c1"))(t); r.QueueName != "qb" {
		t.Fatalf("RoutingDelete returned %+v", r)
	}
	if _, err := s.RoutingDelete(ctx, "c1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second RoutingDelete err = %v", err)
	}
	// Deleting a queue keeps its routings.
	must(s.QueueDelete(ctx, "qa"))(t)
	if r := must(s.RoutingGet(ctx, "c2"))(t); r.QueueName != "qa" {
		t.Fatalf("routing after queue delete = %+v", r)
	}
}

func testRoutingUnknownQueue(t *testing.T, s store.Store) {
	_, err := s.RoutingPut(ctxT(t), &store.Routing{JobCategory: "c", QueueName: "nope"})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("RoutingPut to missing queue err = %v, want ErrNotFound", err)
	}
}
