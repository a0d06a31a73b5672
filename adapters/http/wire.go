package http

// The answers' wire types live in wire_<flow>.go: the application returns plain structs, and
// each wire type mirrors one with the JSON names the API documents. A wire type converts from
// its struct (wireCrew's crewJSON(v)), so the compiler keeps the two field for field.

// wireEach maps every item with wire, keeping a nil slice nil (null on the wire).
func wireEach[T, W any](items []T, wire func(T) W) []W {
	if items == nil {
		return nil
	}
	out := make([]W, len(items))
	for i, item := range items {
		out[i] = wire(item)
	}
	return out
}

// pageJSON is one page of a list: its items and the cursor of the next page (null on the last).
type pageJSON[W any] struct {
	Items      []W     `json:"items"`
	NextCursor *string `json:"nextCursor"`
}

// wirePage is the page of items, each mapped with wire.
func wirePage[T, W any](items []T, nextCursor *string, wire func(T) W) pageJSON[W] {
	return pageJSON[W]{Items: wireEach(items, wire), NextCursor: nextCursor}
}
