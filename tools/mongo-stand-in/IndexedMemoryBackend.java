// The memory backend of mongo-java-server with real secondary indexes (SecondaryIndex) and the
// query planner of QueryPlanner: its databases build them and its collections use them.

import de.bwaldvogel.mongo.MongoDatabase;
import de.bwaldvogel.mongo.backend.CollectionOptions;
import de.bwaldvogel.mongo.backend.CursorRegistry;
import de.bwaldvogel.mongo.backend.Index;
import de.bwaldvogel.mongo.backend.IndexKey;
import de.bwaldvogel.mongo.backend.QueryResult;
import de.bwaldvogel.mongo.backend.memory.MemoryBackend;
import de.bwaldvogel.mongo.backend.memory.MemoryCollection;
import de.bwaldvogel.mongo.backend.memory.MemoryDatabase;
import de.bwaldvogel.mongo.bson.Document;
import de.bwaldvogel.mongo.oplog.Oplog;
import de.bwaldvogel.mongo.backend.DatabaseResolver;
import io.netty.channel.Channel;

import java.util.Collections;
import java.util.Comparator;
import java.util.List;

public class IndexedMemoryBackend extends MemoryBackend {

    @Override
    public MemoryDatabase openOrCreateDatabase(String databaseName) {
        return new Database(databaseName, getCursorRegistry());
    }

    static final class Database extends MemoryDatabase {
        Database(String databaseName, CursorRegistry cursorRegistry) {
            super(databaseName, cursorRegistry);
        }

        @Override
        protected MemoryCollection openOrCreateCollection(String collectionName, CollectionOptions options) {
            return new Collection(this, collectionName, options, cursorRegistry);
        }

        @Override
        public Document handleCommand(Channel channel, String command, Document query, DatabaseResolver databaseResolver, Oplog oplog) {
            Document counted = CountPipeline.answer(command, query, name -> resolveCollection(name, false), this::getFullCollectionNamespace);
            return counted != null ? counted : super.handleCommand(channel, command, query, databaseResolver, oplog);
        }

        @Override
        protected Index<Integer> openOrCreateSecondaryIndex(String collectionName, String indexName, List<IndexKey> keys, boolean sparse) {
            return new SecondaryIndex<>(indexName, keys);
        }
    }

    static final class Collection extends MemoryCollection {
        Collection(MongoDatabase database, String collectionName, CollectionOptions options, CursorRegistry cursorRegistry) {
            super(database, collectionName, options, cursorRegistry);
        }

        /** A count that an index's entries answer alone reads no document (QueryPlanner.coveredCount). */
        @Override
        public int count(Document query, int skip, int limit) {
            long covered = QueryPlanner.coveredCount(getIndexes(), query);
            return covered < 0 ? super.count(query, skip, limit) : QueryPlanner.skipAndLimit(covered, skip, limit);
        }

        @Override
        protected QueryResult queryDocuments(Document query, Document orderBy, int numberToSkip, int limit, int batchSize,
                                             Document fieldSelector) {
            if (limit != 0) {
                List<Integer> ordered = QueryPlanner.orderedCandidates(getIndexes(), query, orderBy, numberToSkip + Math.abs(limit),
                    Comparator.<Integer>naturalOrder(), position -> documentMatchesQuery(getDocument(position), query));
                if (ordered != null) {
                    return matchDocuments(query, ordered, orderBy, numberToSkip, limit, batchSize, fieldSelector);
                }
            }
            List<Integer> positions = QueryPlanner.candidates(getIndexes(), query, Comparator.naturalOrder());
            if (positions == null) {
                if (ScanLog.ENABLED) {
                    ScanLog.scanned(getFullName(), query, orderBy, count(), getIndexes());
                }
                return super.queryDocuments(query, orderBy, numberToSkip, limit, batchSize, fieldSelector);
            }
            if (ScanLog.ENABLED) {
                ScanLog.lookedUp(getFullName(), query, orderBy, limit, count(), getIndexes());
            }
            if (isNaturalDescending(orderBy)) {
                Collections.reverse(positions);
            }
            return matchDocuments(query, positions, orderBy, numberToSkip, limit, batchSize, fieldSelector);
        }
    }
}
