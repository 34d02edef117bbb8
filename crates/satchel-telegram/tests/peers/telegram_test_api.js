// Starts telegram-test-api (a third-party Telegram Bot API emulator, from
// npm) on 127.0.0.1:PORT for the bot's peer test, and runs until stdin
// closes. Usage: node telegram_test_api.js MODULE_DIR PORT
const TelegramServer = require(process.argv[2]);
const port = Number(process.argv[3]);

(async () => {
  const server = new TelegramServer({ port, host: '127.0.0.1', storage: 'RAM', storeTimeout: 60 });
  await server.start();
  process.stdout.write(JSON.stringify({ ready: true, port }) + '\n');
  process.stdin.resume();
  process.stdin.on('end', async () => {
    await server.stop();
    process.exit(0);
  });
})().catch((error) => {
  process.stderr.write(String(error && error.stack || error) + '\n');
  process.exit(1);
});
