// Package lru is a small bounded cache, safe for concurrent use.
package lru

import (
	"container/list"
	"sync"
)

// Cache keeps at most Size entries, evicting the least recently used.
type Cache[K comparable, V any] struct {
	mu    sync.Mutex
	size  int
	ll    *list.List
	items map[K]*list.Element
}

type entry[K comparable, V any] struct {
	k K
	v V
}

// New returns a cache holding at most size entries (minimum 1).
func New[K comparable, V any](size int) *Cache[K, V] {
	if size < 1 {
		size = 1
	}
	return &Cache[K, V]{size: size, ll: list.New(), items: make(map[K]*list.Element)}
}

// Get returns the value for k and marks it recently used.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[k]; ok {
		c.ll.MoveToFront(el)
		return el.Value.(*entry[K, V]).v, true
	}
	var zero V
	return zero, false
}

// Put stores v under k.
func (c *Cache[K, V]) Put(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[k]; ok {
		el.Value.(*entry[K, V]).v = v
		c.ll.MoveToFront(el)
		return
	}
	c.items[k] = c.ll.PushFront(&entry[K, V]{k, v})
	for c.ll.Len() > c.size {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.items, last.Value.(*entry[K, V]).k)
	}
}

// Delete drops k.
func (c *Cache[K, V]) Delete(k K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[k]; ok {
		c.ll.Remove(el)
		delete(c.items, k)
	}
}

// Len returns the number of entries.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}
