// A unique index of the H2 backend whose keys compare as values (issue 17). mongo-java-server's
// H2UniqueIndex keeps its keys in an MVMap typed by H2's ObjectDataType, which compares two key
// tuples (KeyValue, not Comparable) by Java-serializing both: every lookup and insert serialized
// keys dozens of times, and inserting into a collection of a few hundred thousand documents ran at
// a few hundred documents a second. Here the same map, with the same stored form, compares tuples
// value by value (SecondaryIndex.TUPLES); tuples equal as values but not as Java objects (1 and
// 1.0, a missing field and null) still differ, ordered by their serialized form, so the index
// accepts and refuses exactly what H2UniqueIndex did.
//
// The map has a name of its own (".tuples" after H2's), since the order of its entries differs: an
// H2 file written before has its old map removed and the index is built again from the documents
// when the collection opens (AbstractMongoCollection.addIndex fills an empty index).

import de.bwaldvogel.mongo.MongoCollection;
import de.bwaldvogel.mongo.backend.AbstractUniqueIndex;
import de.bwaldvogel.mongo.backend.IndexKey;
import de.bwaldvogel.mongo.backend.KeyValue;
import de.bwaldvogel.mongo.backend.Missing;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.exception.DuplicateKeyError;
import org.h2.mvstore.Cursor;
import org.h2.mvstore.MVMap;
import org.h2.mvstore.MVStore;

import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Objects;
import java.util.Map.Entry;
import java.util.Set;

final class TupleUniqueIndex extends AbstractUniqueIndex<Object> {

    /** H2's object type, with tuples compared as values (and stored as BSON). */
    static final class TupleKeyType extends BsonStorageType {
        @Override
        public int compare(Object a, Object b) {
            if (a instanceof KeyValue && b instanceof KeyValue) {
                int c = SecondaryIndex.TUPLES.compare((KeyValue) a, (KeyValue) b);
                if (c != 0 || a.equals(b)) {
                    return c;
                }
            }
            return super.compare(a, b);
        }
    }

    static String mapName(String h2MapName) {
        return h2MapName + ".tuples";
    }

    /** Opens the index's map; the map H2UniqueIndex kept for it in an older file is removed. */
    static TupleUniqueIndex open(MVStore store, String h2MapName, String name, List<IndexKey> keys, boolean sparse) {
        if (store.hasMap(h2MapName)) {
            // Opened as H2 typed it (removeMap by name opens a generic map, which the store's
            // background rewriting cannot compare keys of), then removed.
            store.removeMap(store.openMap(h2MapName));
        }
        MVMap<KeyValue, Object> map = store.openMap(mapName(h2MapName), new MVMap.Builder<KeyValue, Object>().keyType(new TupleKeyType()));
        return new TupleUniqueIndex(map, name, keys, sparse);
    }

    private final MVMap<KeyValue, Object> map;

    private final List<String> plainKeys;

    private TupleUniqueIndex(MVMap<KeyValue, Object> map, String name, List<IndexKey> keys, boolean sparse) {
        super(name, keys, sparse);
        this.map = map;
        this.plainKeys = SecondaryIndex.plainKeys(keys());
    }

    /**
     * Whether a document without an entry here was added: an empty array under one of the keys
     * gives it no key tuple (as in mongo-java-server's own unique indexes), so a range of prefixes
     * would miss it, and prefixes() reads none. Until the index is built again (an H2 file reopened).
     */
    private volatile boolean holdsUnlisted;

    @Override
    public synchronized void add(Document document, Object position, MongoCollection<Object> collection) {
        if (keys().size() >= 2 && !isSparse() && !holdsUnlisted && getKeyValues(document).isEmpty()) {
            holdsUnlisted = true;
        }
        super.add(document, position, collection);
    }

    /** As Index.getKeyValues, without its general path rules when they are not needed (SecondaryIndex.plainKeyValues). */
    @Override
    public Set<KeyValue> getKeyValues(Document document) {
        Set<KeyValue> plain = SecondaryIndex.plainKeyValues(plainKeys, document);
        return plain != null ? plain : super.getKeyValues(document);
    }

    /**
     * As AbstractUniqueIndex.checkAdd, which reads the document's keys through the general path
     * rules whatever they hold (a tenth of the stand-in's CPU under batch inserts, for the _id
     * index and the events' unique index): a plain key tuple is its own normalized form, so it is
     * looked up as it is. A sparse index keeps the general rules (a document without its keys is
     * not in it).
     */
    @Override
    public synchronized void checkAdd(Document document, MongoCollection<Object> collection) {
        Set<KeyValue> plain = isSparse() ? null : SecondaryIndex.plainKeyValues(plainKeys, document);
        if (plain == null) {
            super.checkAdd(document, collection);
            return;
        }
        for (KeyValue key : plain) {
            if (containsKey(key)) {
                throw new DuplicateKeyError(this, collection, getKeys(), key);
            }
        }
    }

    /**
     * The key prefixes a query reads of this compound index, shorter than its keys (all of them is
     * a point read: canHandle): the plain equality values (normalized, or null for {key: null}) it gives the first keys, then
     * maybe a $in of plain values on the next key, one prefix per value (`{invoice_id:
     * {$in: ids}}` on (invoice_id, key)). Null when the first key has neither, or when the index is
     * sparse (a document without a later key may be absent from it) or lacks a document
     * (holdsUnlisted); no prefix at all for an empty $in, which matches nothing.
     */
    Prefixes prefixes(Document query) {
        if (isSparse() || keys().size() < 2 || holdsUnlisted) {
            return null;
        }
        List<Object> equal = new ArrayList<>();
        List<Object> in = null;
        for (String key : keys()) {
            Object value = SecondaryIndex.equalityValue(query.get(key));
            if (value == null && query.containsKey(key) && SecondaryIndex.isNullEquality(query.get(key))) {
                equal.add(null); // a null or missing field, or an array holding null: all under a null key
                continue;
            }
            if (value == null) {
                in = SecondaryIndex.plainInValues(query.get(key));
                break;
            }
            equal.add(value);
        }
        if (in != null && equal.size() + 1 < keys().size()) {
            List<List<Object>> prefixes = new ArrayList<>();
            for (Object value : in) {
                List<Object> prefix = new ArrayList<>(equal);
                prefix.add(value);
                prefixes.add(prefix);
            }
            return new Prefixes(equal.size() + 1, prefixes);
        }
        // Every key by a plain value is a point read of the index (canHandle); with a null among them it is read as a range.
        return equal.isEmpty() || equal.size() == keys().size() && !equal.contains(null) ? null : new Prefixes(equal.size(), List.of(equal));
    }

    /** Key prefixes of one length (how many keys they bound, what the planner scores). */
    record Prefixes(int length, List<List<Object>> values) {

        /** The keys bounded by something other than null (QueryPlanner's lookup report). */
        int narrowing() {
            return values.isEmpty() ? length : (int) values.get(0).stream().filter(Objects::nonNull).count();
        }

        /** As a secondary index's bounds score: two per key, one when it is null. */
        int score() {
            return length + narrowing();
        }
    }

    /**
     * The positions of the documents whose first keys equal one of `prefixes` (prefixes), each read
     * as a range of the map: a tuple that is a prefix sorts before every tuple extending it, and the
     * tuples extending it follow one another. A fee's {invoice_id} on (invoice_id, key) was a scan
     * of every fee.
     */
    Collection<Object> positionsWithPrefixes(Prefixes prefixes) {
        // A document with an array under a later key has one entry per element: listed once.
        Set<Object> positions = new LinkedHashSet<>();
        for (List<Object> prefix : prefixes.values()) {
            Cursor<KeyValue, Object> cursor = map.cursor(new KeyValue(prefix));
            reading:
            while (cursor.hasNext()) {
                KeyValue key = cursor.next();
                for (int i = 0; i < prefix.size(); i++) {
                    if (key.size() <= i || SecondaryIndex.compareValues(key.get(i), prefix.get(i)) != 0) {
                        break reading;
                    }
                }
                Object position = cursor.getValue();
                if (position != null && !(position instanceof Missing)) {
                    positions.add(position);
                }
            }
        }
        return positions;
    }

    @Override
    protected Object removeDocument(KeyValue keyValue) {
        return map.remove(keyValue);
    }

    @Override
    protected boolean putKeyPosition(KeyValue keyValue, Object position) {
        return map.putIfAbsent(keyValue, Missing.ofNullable(position)) == null;
    }

    @Override
    protected Iterable<Entry<KeyValue, Object>> getIterable() {
        return map.entrySet();
    }

    @Override
    protected Object getPosition(KeyValue keyValue) {
        return map.get(keyValue);
    }

    @Override
    public long getCount() {
        return map.sizeAsLong();
    }

    @Override
    public boolean isEmpty() {
        return map.isEmpty();
    }

    @Override
    public long getDataSize() {
        return getCount();
    }
}
