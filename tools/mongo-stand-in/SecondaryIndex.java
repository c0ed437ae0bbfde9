// A real secondary (non-unique, compound) index for mongo-java-server, which builds every
// non-unique index as an EmptyIndex that answers no query (issue 17; ../shared/design/mongodb-stand-in.md).
//
// Entries: the index's key tuple (the document's values for the index keys, normalized as the
// unique indexes normalize them; one tuple per element for an array, as a multikey index) in a
// sorted map, each with the documents (by _id) and their positions. A query is answered from it when
// its conditions on the index keys form equality on a prefix of the keys, then optionally a range
// ($gt, $gte, $lt, $lte) or $in on the next key: the candidates are the entries in those bounds,
// found in O(log N + matches). Candidates are a superset of the answer: bounds are inclusive and the
// collection filters every candidate with the whole query, as it does after a scan, so an index
// never changes a result, only how many documents are read.
//
// Kept in step with inserts, updates and deletes through mongo-java-server's Index hooks; held in
// memory only: a backend that reopens its data (H2) fills it again from the documents when the
// collection's indexes are opened (AbstractMongoCollection.addIndex fills an empty index).

import de.bwaldvogel.mongo.MongoCollection;
import de.bwaldvogel.mongo.backend.Index;
import de.bwaldvogel.mongo.backend.IndexKey;
import de.bwaldvogel.mongo.backend.KeyValue;
import de.bwaldvogel.mongo.backend.Missing;
import de.bwaldvogel.mongo.backend.ValueComparator;
import de.bwaldvogel.mongo.bson.BsonRegularExpression;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.bson.MaxKey;
import de.bwaldvogel.mongo.bson.MinKey;

import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.NavigableMap;
import java.util.Objects;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Predicate;

public final class SecondaryIndex<P> extends Index<P> {

    private static final ValueComparator VALUES = ValueComparator.asc();

    /**
     * Two values in BSON order, as {@code ValueComparator.asc()} orders them. The pairs index keys
     * hold most (two strings, two instants) are answered here, as ValueComparator answers them
     * (String.compareTo, Instant.compareTo), without its chain of type tests: under single-event
     * ingestion that chain was a fifth of the stand-in's CPU. Any other pair goes to it.
     */
    static int compareValues(Object a, Object b) {
        if (a instanceof String && b instanceof String) {
            return ((String) a).compareTo((String) b);
        }
        if (a instanceof Instant && b instanceof Instant) {
            return ((Instant) a).compareTo((Instant) b);
        }
        return VALUES.compare(a, b);
    }

    /** Tuples compared value by value (BSON order); a shorter tuple that is a prefix comes first. */
    static final Comparator<KeyValue> TUPLES = (a, b) -> {
        int n = Math.min(a.size(), b.size());
        for (int i = 0; i < n; i++) {
            int c = compareValues(a.get(i), b.get(i));
            if (c != 0) {
                return c;
            }
        }
        return Integer.compare(a.size(), b.size());
    };

    /** Key tuples as bare arrays, compared like TUPLES (a KeyValue and its list would double an entry's size). */
    static final Comparator<Object[]> ARRAYS = (a, b) -> {
        int n = Math.min(a.length, b.length);
        for (int i = 0; i < n; i++) {
            int c = compareValues(a[i], b[i]);
            if (c != 0) {
                return c;
            }
        }
        return Integer.compare(a.length, b.length);
    };

    /**
     * Key tuple to the documents under it. The value is a bare position when the tuple has one
     * document whose position is its _id (the H2 backend's documents; most tuples, since a key
     * with a timestamp or an _id in it is mostly unique), else a Postings. A million events' three
     * indexes hold 3 million entries: the bare forms keep each about half the size.
     */
    private final TreeMap<Object[], Object> entries = new TreeMap<>(ARRAYS);

    /** The positions under an entry's value (a bare position or a Postings). */
    @SuppressWarnings("unchecked")
    static <P> Collection<P> positionsOf(Object value) {
        return value instanceof Postings ? ((Postings<P>) value).positions() : List.of((P) value);
    }

    /**
     * The documents (by _id) under one key tuple, with their positions, when that is not one
     * document whose position is its _id; one document is held without a map.
     */
    static final class Postings<P> {
        private Object soleId;
        private P solePosition;
        private HashMap<Object, P> many;

        /** True when the id was not there yet. */
        boolean put(Object id, P position) {
            if (many != null) {
                return many.put(id, position) == null;
            }
            if (solePosition == null) {
                soleId = id;
                solePosition = position;
                return true;
            }
            if (Objects.equals(soleId, id)) {
                solePosition = position;
                return false;
            }
            many = new HashMap<>(4);
            many.put(soleId, solePosition);
            many.put(id, position);
            soleId = null;
            solePosition = null;
            return true;
        }

        /** The removed document's position, or null when it was not there. */
        P remove(Object id) {
            if (many != null) {
                return many.remove(id);
            }
            if (solePosition != null && Objects.equals(soleId, id)) {
                P removed = solePosition;
                soleId = null;
                solePosition = null;
                return removed;
            }
            return null;
        }

        boolean isEmpty() {
            return many != null ? many.isEmpty() : solePosition == null;
        }

        Collection<P> positions() {
            if (many != null) {
                return many.values();
            }
            return solePosition == null ? List.of() : List.of(solePosition);
        }
    }
    private long count;
    /**
     * An array was seen under a key: ranges are then unsafe (conditions may hold on different
     * elements), and an entry's key no longer says alone whether its document matches (no count
     * or filter from the entries: KeyTests).
     */
    private boolean multikey;
    /**
     * A key held an instant finer than a millisecond (a date the server sets: $currentDate): its
     * entry, cut to the millisecond (arrayOf), no longer says whether the document matches an
     * equality or a range on it, so no count or filter reads the entries.
     */
    private boolean subMillisecond;

    public SecondaryIndex(String name, List<IndexKey> keys) {
        super(name, keys, false);
        this.plainKeys = plainKeys(keys());
        this.idKey = keys().indexOf("_id");
    }

    /** Where _id is among the keys, or -1. */
    private final int idKey;

    /** The index's key paths when none of them has a dot, else null (see plainKeyValues). */
    private final List<String> plainKeys;

    @Override
    public Set<KeyValue> getKeyValues(Document document) {
        Set<KeyValue> plain = plainKeyValues(plainKeys, document);
        return plain != null ? plain : super.getKeyValues(document);
    }

    static List<String> plainKeys(List<String> keys) {
        for (String key : keys) {
            if (key.indexOf('.') >= 0) {
                return null;
            }
        }
        return keys;
    }

    /**
     * A document's key tuples when every key is a top-level field holding a string, an instant, a
     * boolean, null or nothing, or (under one key at most) an array of those: the tuples
     * Index.getKeyValues gives then (such values are their own normalized form; null and missing
     * are null; an array gives one tuple per distinct element, in order, and none when empty),
     * without its path splitting by regular expression and its streams, which were a seventh of the
     * stand-in's CPU under batch inserts, and a fifth with an array key (an event's
     * subscription_ids). Null when another value (a number, a document, an array of anything else,
     * arrays under two keys) asks for the general rules.
     */
    static Set<KeyValue> plainKeyValues(List<String> keys, Document document) {
        if (keys == null) {
            return null;
        }
        Object[] values = new Object[keys.size()];
        int arrayAt = -1;
        for (int i = 0; i < values.length; i++) {
            Object value = document.getOrMissing(keys.get(i));
            if (value == null || value instanceof Missing) {
                values[i] = null;
            } else if (isPlainScalar(value)) {
                values[i] = value;
            } else if (value instanceof List && arrayAt < 0 && allPlain((List<?>) value)) {
                arrayAt = i;
                values[i] = value;
            } else {
                return null;
            }
        }
        if (arrayAt < 0) {
            return Set.of(new KeyValue(Arrays.asList(values)));
        }
        Set<KeyValue> tuples = new LinkedHashSet<>();
        for (Object element : (List<?>) values[arrayAt]) {
            Object[] tuple = values.clone();
            tuple[arrayAt] = element;
            tuples.add(new KeyValue(Arrays.asList(tuple)));
        }
        return tuples;
    }

    private static boolean isPlainScalar(Object value) {
        return value instanceof String || value instanceof Instant || value instanceof Boolean;
    }

    private static boolean allPlain(List<?> values) {
        for (Object value : values) {
            if (value != null && !isPlainScalar(value)) {
                return false;
            }
        }
        return true;
    }

    // ---- what a query can use ------------------------------------------------------------------

    /** How a query's conditions on the index keys bound the key tuples; null when unusable. */
    static final class Bounds {
        final List<Object> prefix = new ArrayList<>();
        /** Values of $in on the next key (normalized), or null. */
        List<Object> in;
        /** Range on the next key (normalized; null: unbounded on that side), when ranged. */
        Object low;
        Object high;
        boolean ranged;

        /** Two per key of the prefix (one when it is null: most documents may share it), one for a $in or a range. */
        int score() {
            return prefix.size() + narrowing();
        }

        /** The keys bounded by something other than null (QueryPlanner's lookup report). */
        int narrowing() {
            return (int) prefix.stream().filter(Objects::nonNull).count() + (in != null || ranged ? 1 : 0);
        }
    }

    private static Object normalize(Object value) {
        return new KeyValue(new Object[] {value}).normalized().get(0);
    }

    /**
     * A value usable as a key: a scalar (not null, which also matches a missing field; not an array
     * or an embedded document, whose equality has rules of their own; not a regex).
     */
    static boolean isPlainValue(Object value) {
        return value != null
            && !(value instanceof Collection)
            && !(value instanceof Map)
            && !BsonRegularExpression.isRegularExpression(value);
    }

    /**
     * Whether a condition is equality with null ({key: null} or {key: {$eq: null}}). Every document
     * it matches has a null key in a secondary index (a null or missing field, an array holding
     * null; Index.getKeyValues normalizes a missing value to null, and an empty array is indexed as
     * null too), so the entries under null are a superset of its answer. A secondary index takes it
     * as one more key of its equality prefix: {organization_id, deleted_at: null}, the live
     * documents of an organization, then reads its page in (organization_id, deleted_at, created_at)
     * order instead of all of the organization's documents.
     */
    static boolean isNullEquality(Object condition) {
        return equalityOperand(condition) == null;
    }

    /** What an equality condition compares with: the value of {$eq: value}, else the condition itself. */
    private static Object equalityOperand(Object condition) {
        if (condition instanceof Document && ((Document) condition).size() == 1 && ((Document) condition).containsKey("$eq")) {
            return ((Document) condition).get("$eq");
        }
        return condition;
    }

    /** The normalized value of an equality condition (a plain value, or {$eq: a plain value}); null for any other condition. */
    static Object equalityValue(Object condition) {
        Object value = equalityOperand(condition);
        return isPlainValue(value) ? normalize(value) : null;
    }

    /** The bounds a query gives this index, or null when it can use none of its keys. */
    Bounds boundsFor(Document query) {
        Bounds bounds = new Bounds();
        for (String key : keys()) {
            if (!query.containsKey(key)) {
                break;
            }
            Object condition = query.get(key);
            Object equal = equalityValue(condition);
            if (equal != null) {
                bounds.prefix.add(equal);
                continue;
            }
            if (isNullEquality(condition)) {
                // {key: null} matches a null or missing field, or an array holding null: each has a null key here.
                bounds.prefix.add(null);
                continue;
            }
            if (condition instanceof Document && !BsonRegularExpression.isRegularExpression(condition)) {
                readRangeOrIn((Document) condition, bounds);
            }
            break;
        }
        return bounds.score() == 0 ? null : bounds;
    }

    /**
     * The normalized values of `{$in: [plain values]}`, in the query's order (empty for an empty
     * list); null for any other condition, or when one of the values is not plain (isPlainValue).
     */
    static List<Object> plainInValues(Object condition) {
        if (!(condition instanceof Document) || ((Document) condition).size() != 1
            || !(((Document) condition).get("$in") instanceof Collection<?> listed)) {
            return null;
        }
        List<Object> values = new ArrayList<>();
        for (Object value : listed) {
            if (!isPlainValue(value)) {
                return null;
            }
            values.add(normalize(value));
        }
        return values;
    }

    private void readRangeOrIn(Document operators, Bounds bounds) {
        if (operators.size() == 1 && operators.get("$in") instanceof Collection) {
            List<Object> values = plainInValues(operators);
            if (values != null && !values.isEmpty()) {
                bounds.in = values;
            }
            return;
        }
        if (multikey) {
            return;
        }
        Object low = null;
        Object high = null;
        for (Map.Entry<String, Object> operator : operators.entrySet()) {
            Object value = operator.getValue();
            if (!isPlainValue(value)) {
                return;
            }
            switch (operator.getKey()) {
                case "$gt":
                case "$gte":
                    low = normalize(value);
                    break;
                case "$lt":
                case "$lte":
                    high = normalize(value);
                    break;
                default:
                    return;
            }
        }
        bounds.low = low;
        bounds.high = high;
        bounds.ranged = true;
    }

    /**
     * False: mongo-java-server's own planner (the first index that accepts) never picks this index;
     * QueryPlanner does, by boundsFor, and can be turned off to compare answers without indexes.
     */
    @Override
    public boolean canHandle(Document query) {
        return false;
    }

    /** The candidates of a query, in no particular order (the collection puts them in natural order). */
    @Override
    public synchronized Iterable<P> getPositions(Document query) {
        Bounds bounds = boundsFor(query);
        if (bounds == null) {
            throw new IllegalArgumentException("query not handled by " + this + ": " + query);
        }
        Set<P> positions = new LinkedHashSet<>();
        if (bounds.in != null) {
            for (Object value : bounds.in) {
                collect(between(tuple(bounds.prefix, value, MinKey.getInstance()), tuple(bounds.prefix, value, MaxKey.getInstance())), positions);
            }
        } else {
            collect(within(bounds), positions);
        }
        return positions;
    }

    /**
     * How a count reads this index's entries alone, without a document, or null when they cannot
     * answer the query. They can when every condition of the query is on one of its keys, every key
     * is a top-level field, no document has held an array under a key (one entry per document) or
     * an instant finer than a millisecond, and each condition is equality with a string, an
     * instant, a boolean or null, or a range ($gt, $gte, $lt, $lte) of strings or of instants (a
     * range mixing the two counts nothing, as a scan): an entry's key then says whether its
     * document matches (a null key is a null or missing field, which {field: null} matches). The
     * conditions need not be a prefix: the entries in the bounds of the ones that are (all of them
     * when none is) are each tested against the others. A list's total read every document it
     * counted: all of an organization's events, 17 s for a million; the same with a code (`GET
     * /v1/events?code=`), whose key is third in (organization_id, external_customer_id, code,
     * timestamp).
     */
    KeyTests covered(Document query) {
        return keyTests(query, true);
    }

    /**
     * The conditions of a query that this index's entries can test (see covered), when one of them
     * is on a key that its bounds do not restrict: the entries then narrow the candidates beyond
     * the bounds. Null otherwise.
     */
    KeyTests keyFilter(Document query) {
        KeyTests filter = keyTests(query, false);
        return filter != null && filter.testsBeyond(filter.boundedFields()) ? filter : null;
    }

    /** The key tests of a query's conditions: of all of them (`all`; null when one cannot be tested), or of those that can be. */
    private synchronized KeyTests keyTests(Document query, boolean all) {
        if (multikey || subMillisecond || plainKeys == null) {
            return null;
        }
        Bounds bounds = boundsFor(query);
        // The keys of an equality prefix need no test: an entry in its range has that very value.
        int fixed = bounds == null ? 0 : bounds.prefix.size();
        List<Predicate<Object>> tests = new ArrayList<>();
        List<Integer> at = new ArrayList<>();
        List<String> fields = new ArrayList<>();
        for (Map.Entry<String, Object> condition : query.entrySet()) {
            int key = plainKeys.indexOf(condition.getKey());
            Predicate<Object> test = key < 0 ? null : keyTest(condition.getValue());
            if (test == null) {
                if (all) {
                    return null;
                }
                continue;
            }
            fields.add(condition.getKey());
            if (key >= fixed) {
                tests.add(test);
                at.add(key);
            }
        }
        return fields.isEmpty() ? null : new KeyTests(bounds, tests, at, fields);
    }

    /** The key names a query's bounds restrict on this index: its equality prefix, then a range (not a $in: its entries are not read by value). */
    List<String> boundedFields(Bounds bounds) {
        return bounds == null ? List.of() : keys().subList(0, bounds.prefix.size() + (bounds.ranged ? 1 : 0));
    }

    /**
     * A query's conditions as this index's entries test them (see covered and keyFilter): the
     * entries in its bounds whose keys pass every test, counted or listed.
     */
    final class KeyTests {
        private final Bounds bounds;
        private final List<Predicate<Object>> tests;
        private final List<Integer> at;
        /** The fields of the conditions the entries answer: the bounds' and the tested. */
        private final List<String> fields;

        private KeyTests(Bounds bounds, List<Predicate<Object>> tests, List<Integer> at, List<String> fields) {
            this.bounds = bounds;
            this.tests = tests;
            this.at = at;
            this.fields = fields;
        }

        /** The fields this index's own bounds restrict. */
        List<String> boundedFields() {
            return SecondaryIndex.this.boundedFields(bounds);
        }

        /** Whether the entries answer a condition on a field outside `bounded`. */
        boolean testsBeyond(List<String> bounded) {
            return !bounded.containsAll(fields);
        }

        /** How many conditions the entries answer. */
        int answered() {
            return fields.size();
        }

        /** How many documents the index holds: what the entries read are a part of. */
        long indexed() {
            return getCount();
        }

        /** How narrowly the entries read are bounded (0: every entry). */
        int score() {
            return bounds == null ? 0 : bounds.score();
        }

        /** The documents whose entries pass, or -1 when the index can no longer say (an array or a finer instant came in meanwhile). */
        long count() {
            synchronized (SecondaryIndex.this) {
                if (multikey || subMillisecond) {
                    return -1;
                }
                long count = 0;
                for (Map.Entry<Object[], Object> entry : within(bounds).entrySet()) {
                    if (passes(entry.getKey())) {
                        Object documents = entry.getValue();
                        count += documents instanceof Postings ? ((Postings<?>) documents).positions().size() : 1;
                    }
                }
                return count;
            }
        }

        /**
         * The positions of the entries that pass, in no particular order; null when there are more
         * than `cap`, or when the index can no longer say.
         */
        List<P> positions(int cap) {
            synchronized (SecondaryIndex.this) {
                if (multikey || subMillisecond) {
                    return null;
                }
                List<P> positions = new ArrayList<>();
                for (Map.Entry<Object[], Object> entry : within(bounds).entrySet()) {
                    if (passes(entry.getKey())) {
                        positions.addAll(SecondaryIndex.<P>positionsOf(entry.getValue()));
                        if (positions.size() > cap) {
                            return null;
                        }
                    }
                }
                return positions;
            }
        }

        private boolean passes(Object[] key) {
            for (int i = 0; i < tests.size(); i++) {
                if (!tests.get(i).test(key[at.get(i)])) {
                    return false;
                }
            }
            return true;
        }
    }

    /**
     * What a condition asks of an entry's key, as mongo-java-server's matcher answers it for a
     * document whose field holds that key; null when the key cannot say (any other condition or
     * value). Equality: the same value (a null key for null). A range: a value of the operand's own
     * class (the matcher compares a string or an instant only with one of its class) on the right
     * side of each bound.
     */
    private static Predicate<Object> keyTest(Object condition) {
        if (isNullEquality(condition)) {
            return key -> key == null;
        }
        Object equal = equalityOperand(condition);
        if (isPlainScalar(equal)) {
            return equal::equals;
        }
        if (!(condition instanceof Document) || ((Document) condition).isEmpty()) {
            return null;
        }
        Predicate<Object> test = key -> true;
        for (Map.Entry<String, Object> operator : ((Document) condition).entrySet()) {
            Object operand = operator.getValue();
            if (!(operand instanceof String || operand instanceof Instant)) {
                return null;
            }
            Predicate<Object> bound = switch (operator.getKey()) {
                case "$gt" -> key -> compareValues(key, operand) > 0;
                case "$gte" -> key -> compareValues(key, operand) >= 0;
                case "$lt" -> key -> compareValues(key, operand) < 0;
                case "$lte" -> key -> compareValues(key, operand) <= 0;
                default -> null;
            };
            if (bound == null) {
                return null;
            }
            test = test.and(key -> key != null && key.getClass() == operand.getClass()).and(bound);
        }
        return test;
    }

    /**
     * The entries of a query's bounds in key order (descending: reversed), a view read as the
     * caller goes (the collection's lock is held by the query, and writes take it too), for a sort
     * on `sortFields`, which must be the keys right after the equality prefix, in that order. Null
     * when the bounds cannot give them in that order: $in on the next key, other sort fields, or a
     * multikey index (MongoDB sorts an array by one of its elements).
     */
    Iterator<Map.Entry<Object[], Object>> orderedEntries(Bounds bounds, boolean descending, List<String> sortFields) {
        if (bounds.in != null || multikey) {
            return null;
        }
        List<String> keys = keys();
        int first = bounds.prefix.size();
        if (sortFields.isEmpty() || first + sortFields.size() > keys.size() || !keys.subList(first, first + sortFields.size()).equals(sortFields)) {
            return null;
        }
        NavigableMap<Object[], Object> range = within(bounds);
        return (descending ? range.descendingMap() : range).entrySet().iterator();
    }

    /** prefix, then `next` (when given), then `fill` for every key left. */
    private Object[] tuple(List<Object> prefix, Object next, Object fill) {
        List<Object> values = new ArrayList<>(prefix);
        if (next != null) {
            values.add(next);
        }
        while (values.size() < keys().size()) {
            values.add(fill);
        }
        return values.toArray();
    }

    private void collect(NavigableMap<Object[], Object> range, Set<P> into) {
        for (Object documents : range.values()) {
            into.addAll(SecondaryIndex.<P>positionsOf(documents));
        }
    }

    /**
     * The entries within a query's bounds, but for a $in (read value by value, getPositions): its
     * equality prefix, then its range on the next key. Every entry without bounds.
     */
    private NavigableMap<Object[], Object> within(Bounds bounds) {
        if (bounds == null) {
            return entries;
        }
        Object lowNext = bounds.ranged ? (bounds.low == null ? MinKey.getInstance() : bounds.low) : null;
        Object highNext = bounds.ranged ? (bounds.high == null ? MaxKey.getInstance() : bounds.high) : null;
        return between(tuple(bounds.prefix, lowNext, MinKey.getInstance()), tuple(bounds.prefix, highNext, MaxKey.getInstance()));
    }

    /** The entries from low to high, both included. */
    private NavigableMap<Object[], Object> between(Object[] low, Object[] high) {
        // Bounds in different type brackets the wrong way round ({$gt: "a", $lt: 5}): no value is in both.
        return ARRAYS.compare(low, high) > 0 ? Collections.emptyNavigableMap() : entries.subMap(low, true, high, true);
    }

    // ---- keeping it in step ------------------------------------------------------------------

    private static Object idOf(Document document) {
        return normalize(document.get("_id"));
    }

    private boolean hasArray(Document document) {
        for (String key : keys()) {
            Object value = document;
            for (String part : key.split("\\.")) {
                if (value instanceof Collection) {
                    return true;
                }
                if (!(value instanceof Document)) {
                    value = null;
                    break;
                }
                value = ((Document) value).get(part);
            }
            if (value instanceof Collection) {
                return true;
            }
        }
        return false;
    }

    /**
     * The document's key tuples. An empty array has no element to index: MongoDB indexes it as a
     * key of its own, here null (an array makes the index multikey, so no count trusts that entry),
     * so that the document is still found by its other keys.
     */
    private Set<KeyValue> tuplesOf(Document document) {
        Set<KeyValue> tuples = getKeyValues(document);
        if (!tuples.isEmpty()) {
            return tuples;
        }
        return getKeyValues((Document) withoutEmptyArrays(document));
    }

    private static Object withoutEmptyArrays(Object value) {
        if (value instanceof Collection) {
            Collection<?> values = (Collection<?>) value;
            if (values.isEmpty()) {
                return null;
            }
            List<Object> copy = new ArrayList<>();
            for (Object element : values) {
                copy.add(withoutEmptyArrays(element));
            }
            return copy;
        }
        if (value instanceof Document) {
            Document copy = new Document();
            for (Map.Entry<String, Object> entry : ((Document) value).entrySet()) {
                copy.put(entry.getKey(), withoutEmptyArrays(entry.getValue()));
            }
            return copy;
        }
        return value;
    }

    @Override
    public P getPosition(Document document) {
        // The _id index answers this for the collection; a secondary index never does.
        return null;
    }

    @Override
    public void checkAdd(Document document, MongoCollection<P> collection) {
        // Not unique: nothing to check.
    }

    @Override
    public synchronized void add(Document document, P position, MongoCollection<P> collection) {
        if (hasArray(document)) {
            multikey = true;
        }
        // The H2 backend's position is the document's _id, read from the data map's key, and the
        // document's own _id is another copy of it once a reopened file's documents are indexed: one
        // copy serves the entries (a string _id is a tenth of a million events' index memory).
        Object ownId = idOf(document);
        Object id = position != null && position.equals(ownId) ? position : ownId;
        for (KeyValue tuple : tuplesOf(document)) {
            for (Object value : tuple) {
                if (value instanceof Instant && ((Instant) value).getNano() % 1_000_000 != 0) {
                    subMillisecond = true;
                }
            }
            Object[] key = arrayOf(tuple);
            if (idKey >= 0 && id != null && id.equals(key[idKey])) {
                key[idKey] = id;
            }
            Object documents = entries.get(key);
            if (documents == null) {
                // One document whose position is its _id: the position alone says both.
                entries.put(compact(key), position != null && position.equals(id) ? position : posting(id, position));
                count++;
                continue;
            }
            if (!(documents instanceof Postings) && documents.equals(id) && documents.equals(position)) {
                continue; // already there, as its bare position
            }
            Postings<P> postings = postingsOf(documents);
            if (postings != documents) {
                entries.put(key, postings);
            }
            if (postings.put(id, position)) {
                count++;
            }
        }
    }

    /**
     * A tuple as the map's key. An instant is cut to the millisecond, a BSON date's precision: a
     * date the server sets ($currentDate) has more until its document is read back from H2, and the
     * entry added with it must be the one removed later (a stale entry would count twice).
     */
    private static Object[] arrayOf(KeyValue tuple) {
        Object[] values = new Object[tuple.size()];
        for (int i = 0; i < values.length; i++) {
            Object value = tuple.get(i);
            values[i] = value instanceof Instant ? ((Instant) value).truncatedTo(ChronoUnit.MILLIS) : value;
        }
        return values;
    }

    private static <P> Postings<P> posting(Object id, P position) {
        Postings<P> postings = new Postings<>();
        postings.put(id, position);
        return postings;
    }

    /** An entry's value as a Postings (a bare position becomes one, its id being itself). */
    @SuppressWarnings("unchecked")
    private static <P> Postings<P> postingsOf(Object documents) {
        return documents instanceof Postings ? (Postings<P>) documents : posting(documents, (P) documents);
    }

    /**
     * The tuple the map keeps for a new key, compacted: the strings of all
     * its keys but the last are interned. Those are the equality prefix (an organization, a
     * subscription, a metric), repeated by every document of theirs, and each document brings its
     * own copies: shared, a million events' indexes take a fraction of the heap. The last key (a
     * timestamp, an _id) is mostly unique and kept as it is.
     */
    private static Object[] compact(Object[] values) {
        for (int i = 0; i < values.length - 1; i++) {
            if (values[i] instanceof String) {
                values[i] = ((String) values[i]).intern();
            }
        }
        return values;
    }

    /** Answers the document's position (the collection checks that every index agrees on it), or null when it was not indexed. */
    @Override
    public synchronized P remove(Document document) {
        Object id = idOf(document);
        P position = null;
        for (KeyValue tuple : tuplesOf(document)) {
            Object[] key = arrayOf(tuple);
            Object documents = entries.get(key);
            if (documents == null) {
                continue;
            }
            P removed;
            if (documents instanceof Postings) {
                @SuppressWarnings("unchecked")
                Postings<P> postings = (Postings<P>) documents;
                removed = postings.remove(id);
                if (postings.isEmpty()) {
                    entries.remove(key);
                }
            } else if (documents.equals(id)) {
                @SuppressWarnings("unchecked")
                P bare = (P) documents;
                removed = bare;
                entries.remove(key);
            } else {
                removed = null;
            }
            if (removed != null) {
                position = removed;
                count--;
            }
        }
        return position;
    }

    @Override
    public void checkUpdate(Document oldDocument, Document newDocument, MongoCollection<P> collection) {
        // Not unique: nothing to check.
    }

    @Override
    public synchronized void updateInPlace(Document oldDocument, Document newDocument, P position, MongoCollection<P> collection) {
        if (nullAwareEqualsKeys(oldDocument, newDocument) && !hasArray(newDocument)) {
            return;
        }
        remove(oldDocument);
        add(newDocument, position, collection);
    }

    @Override
    public synchronized long getCount() {
        return count;
    }

    @Override
    public long getDataSize() {
        return 0;
    }

    @Override
    public synchronized void drop() {
        entries.clear();
        count = 0;
        multikey = false;
        subMillisecond = false;
    }
}
