// MongoDB stand-in for machines without mongod (see docs/architecture.md and
// ../shared/design/mongodb-stand-in.md). Runs in Java single-file source mode:
//
//   java -cp <classpath>:<classes> Launcher <host> <port> <memory | path/to/file.mv>
//
// (its classes and those beside it, compiled by scripts/bootstrap.sh).
//
// mongo-java-server's own main classes bind 27017 and announce wire version 8, which the
// MongoDB Node driver 7 (mongoose 9) refuses. This launcher binds the given address and
// announces MongoDB 4.4 (wire version 9), the oldest version the driver accepts, so the
// driver never assumes a newer server feature that the stand-in lacks.

import de.bwaldvogel.mongo.MongoBackend;
import de.bwaldvogel.mongo.MongoServer;
import de.bwaldvogel.mongo.MongoVersion;

import java.util.List;

public class Launcher {

    /** The MongoDB version the stand-in announces in hello / buildInfo. */
    static final MongoVersion ANNOUNCED = new MongoVersion() {
        @Override
        public List<Integer> getVersionArray() {
            return List.of(4, 4, 0);
        }

        @Override
        public int getWireVersion() {
            return 9;
        }
    };

    public static void main(String[] args) {
        if (args.length != 3) {
            System.err.println("usage: java -cp <classpath> Launcher.java <host> <port> <memory | h2 file>");
            System.exit(2);
        }
        // Netty checks every byte a buffer reads or writes (bounds, reference count): with documents
        // stored as BSON (BsonStorageType) those checks were a third of the stand-in's CPU under
        // load. Off here, before the first buffer class loads; a stand-in for development and tests.
        System.setProperty("io.netty.buffer.checkAccessible", "false");
        System.setProperty("io.netty.buffer.checkBounds", "false");
        String host = args[0];
        int port = Integer.parseInt(args[1]);
        String storage = args[2];

        // With real secondary indexes (SecondaryIndex, QueryPlanner; STAND_IN_INDEXES=off answers by scans).
        MongoBackend backend = "memory".equals(storage) ? new IndexedMemoryBackend() : IndexedH2Backend.open(storage);
        backend.version(ANNOUNCED);
        MongoServer server = new MongoServer(backend);
        server.bind(host, port);

        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            server.shutdownNow();
            backend.close();
        }));
        // The start and test scripts wait for this exact line.
        System.out.println("mongo-stand-in ready on " + host + ":" + port + " (" + storage + ", wire version "
                + ANNOUNCED.getWireVersion() + ")");
        System.out.flush();
    }
}
